"""Text typed as a flag or config value reads escapes one way everywhere (data.escapes):
sample.py's --prompt and --stop, explore_attention.py's --prompt, and the prompts of
the TensorBoard views (train.sample_prompt, train.attention_prompt). ``\\\\`` is a
literal backslash. --prompt used to be taken literally while --stop read escapes."""

import dataclasses

import numpy as np
import pytest

import explore_attention
import sample
from data.escapes import ESCAPES_HELP, unescape
from data.tokenizer import CharTokenizer
from model.checkpoint import save_checkpoint
from tests.conftest import sharp_model
from training.config import ConfigError, load_config
from training.run_writer import usable_prompt

TYPED = [  # as typed in a shell between single quotes -> the text meant
    (r"int main(void)\n{", "int main(void)\n{"),
    (r"a\\nb", "a\\nb"),  # an escaped backslash: a backslash, then n
    (r"tab\there", "tab\there"),
    (r"caf\u00e9", "café"),
    (r"C:\q", "C:\\q"),  # an unknown escape is kept as typed
]
CHARS = sorted(set("\n\\{}()abcdefhimnoqrtvé :C"))


@pytest.mark.parametrize(("typed", "meant"), TYPED)
def test_prompt_and_stop_read_the_same_text(typed, meant):
    args = sample.build_parser().parse_args(["--prompt", typed, "--stop", typed])
    stops = sample.check_arguments(args)[2]  # after the sampling settings and stream
    assert args.prompt == stops[0] == meant
    args = explore_attention.build_parser().parse_args(["--prompt", typed])
    explore_attention.check_modes(args)
    assert args.prompt == meant
    assert unescape(typed) == meant


def test_the_escapes_are_documented_on_every_flag_that_reads_them():
    def flag_help(parser, flag):
        return next(a.help for a in parser._actions if flag in a.option_strings)

    for parser, flag in [
        (sample.build_parser(), "--prompt"),
        (sample.build_parser(), "--stop"),
        (explore_attention.build_parser(), "--prompt"),
    ]:
        assert ESCAPES_HELP in flag_help(parser, flag), flag
    assert "--prompt and --stop read text the same way" in sample.build_parser().description


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    model = sharp_model(vocab_size=len(CHARS), seed=5, std=0.2)
    folder = tmp_path_factory.mktemp("run")
    payload = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "vocab": CHARS,
    }
    save_checkpoint(payload, folder / "ckpt.pt")
    return folder


@pytest.mark.parametrize(("typed", "meant"), TYPED[:2])
def test_sample_continues_the_prompt_it_was_given(capsys, checkpoint_dir, typed, meant):
    argv = ["--out-dir", str(checkpoint_dir), "--device", "cpu", "--prompt", typed]
    code = sample.main(argv + ["--max-new-tokens", "2", "--temperature", "0", "--no-stream"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(meant)


def test_the_tensorboard_prompts_read_escapes_as_the_flags_do():
    tokenizer = CharTokenizer(sorted(set("ROMEO:\n abc")), "nfc")
    val_ids = np.zeros(100, dtype=np.uint16)
    assert usable_prompt(r"ROMEO:\n", tokenizer, val_ids, "train.sample_prompt") == "ROMEO:\n"
    with pytest.raises(ConfigError, match=r"train.sample_prompt 'a\\\\x'"):
        load_config(None, [r"train.sample_prompt=a\x"])


EMOJI = "\U0001f600"


@pytest.mark.parametrize(
    "typed", [r"\ud83d\ude00", r"\uD83D\uDE00", "\ud83d\ude00", r"\U0001f600", EMOJI]
)
def test_a_surrogate_pair_reads_as_the_character_it_encodes(typed):
    """JSON writes 😀 as \\ud83d\\ude00 (a UTF-16 surrogate pair); read as two lone
    surrogates, --prompt and --stop refused it as unknown characters (issue 33,
    point 10). A pair given as characters (PyYAML reads "\\ud83d\\ude00" so) joins too."""
    assert unescape(typed) == EMOJI
    args = sample.build_parser().parse_args(["--prompt", typed, "--stop", typed])
    stops = sample.check_arguments(args)[2]  # after the sampling settings and stream
    assert args.prompt == stops[0] == EMOJI


@pytest.mark.parametrize(
    ("typed", "named"),
    [
        (r"\ud800", r"\ud800"),
        (r"a\ude00b", r"\ude00"),
        (r"\ude00\ud83d", r"\ude00"),  # the wrong order is no pair
        (r"\U0000dfff", r"\udfff"),
        ("caf\udce9", r"\udce9"),  # a byte that is not UTF-8, as Python keeps it in argv
    ],
)
def test_a_lone_surrogate_is_refused_when_the_text_is_read(typed, named, capsys):
    """Half a pair is no character: refused before any model is loaded, naming it."""
    expected = f"lone surrogate {named}"
    with pytest.raises(ValueError) as e:
        unescape(typed)
    assert expected in str(e.value)
    assert sample.main(["--out-dir", "nowhere", "--prompt", typed]) == 2
    message = capsys.readouterr().err
    assert message.startswith("error: --prompt ") and expected in message
    message.encode("utf-8")  # the message itself holds no lone surrogate


def test_a_lone_surrogate_in_a_text_key_is_refused_with_the_configuration():
    """data.separator='\\ud800' passed the checks and ended in a traceback during
    preparation; every text key is now refused when the configuration is checked."""
    for key in ("data.separator", "train.sample_prompt", "train.attention_prompt"):
        with pytest.raises(ConfigError, match=rf"{key} .*lone surrogate \\ud800"):
            load_config(None, [rf"{key}=a\ud800"])
    assert load_config(None, [r"data.separator=\ud83d\ude00"]).data.separator == r"\ud83d\ude00"
