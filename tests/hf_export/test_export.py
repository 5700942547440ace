"""export.py and hf_export: a tiny run trained here loads in transformers with no code
of ours and gives our logits, greedy text and tokens; runs no architecture matches are
refused; bad targets, missing checkpoints and a missing transformers name the fix."""

import dataclasses
import logging
import random
import subprocess
import sys
import unicodedata

import pytest
import torch

import export
import sample
from model.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from tests.conftest import ROOT, made_korean_text, sharp_model, tiny_overrides
from training.config import load_config
from training.loop import train

transformers = pytest.importorskip("transformers")

ENGLISH = "To be, or not to be: that is the question.\nWhether 'tis nobler in the mind?\n"
MODERN = {  # the model section of configs/shakespeare_char_cpu.yaml
    "model.position": "rope",
    "model.norm": "rmsnorm",
    "model.qk_norm": "true",
    "model.activation": "relu2",
    "model.bias": "false",
    "model.tie_embeddings": "false",
}
ROPE = {"position": "rope", "norm": "rmsnorm", "activation": "relu2"}
RUNS = {"gpt2": {"model.bias": "false"}, "modern": MODERN}
CLASSES = {"gpt2": "GPT2LMHeadModel", "modern": "Qwen3ForCausalLM"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """For each recipe's block: (run folder, export folder) of a 6-step run on English
    and Korean text (block_size 32)."""
    corpus = tmp_path_factory.mktemp("corpus") / "input.txt"
    corpus.write_text(ENGLISH * 20 + made_korean_text(4000), encoding="utf-8")
    folders = {}
    for name, model in RUNS.items():
        tmp = tmp_path_factory.mktemp(name)
        # No TensorBoard sample or heatmaps: seconds of CPU that no test here reads.
        quiet = {"train.sample_tokens": 0, "train.attention_prompt": "", "train.eval_interval": 6}
        overrides = tiny_overrides(tmp, corpus, device="cpu", **model, **quiet)
        train(load_config(None, overrides))
        assert export.main(["--out-dir", str(tmp / "run"), "--to", str(tmp / "hf")]) == 0
        folders[name] = (tmp / "run", tmp / "hf")
    return folders


def load_exported(folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("name", RUNS)
def test_exported_logits_equal_ours(exported, name):
    run, folder = exported[name]
    ours, tokenizer = model_from_checkpoint(load_checkpoint(run / "ckpt.pt"))
    theirs, _ = load_exported(folder)
    assert type(theirs).__name__ == CLASSES[name]
    ids = torch.randint(tokenizer.vocab_size, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = ours.eval()(ids)[0]
        got = theirs(input_ids=ids).logits
    assert expected.abs().max() > 0.1  # trained logits, not all zero
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", RUNS)
def test_greedy_generate_gives_sample_py_text(exported, capsys, name):
    run, folder = exported[name]
    model, tokenizer = load_exported(folder)
    for prompt in ("To be", "새가 하늘"):  # 22 new characters: inside block_size 32
        code = sample.main(
            ["--out-dir", str(run), "--device", "cpu", "--prompt", prompt]
            + ["--temperature", "0", "--max-new-tokens", "22", "--no-stream"]
        )
        ours = capsys.readouterr().out.removesuffix("\n")
        assert code == 0
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        out = model.generate(ids, max_new_tokens=22, do_sample=False)
        assert out.shape[1] == len(prompt) + 22  # no EOS ends it early
        assert tokenizer.decode(out[0]) == ours


@pytest.mark.parametrize("name", RUNS)
def test_batched_greedy_text_equals_each_prompts_own(exported, name):
    """tokenizer(prompts, padding=True) pads on the left with a character of the
    vocabulary, and its attention mask keeps the pads out of the model's view: each
    row's greedy text is that prompt's text generated alone. One prompt holds the pad
    character itself, which must count as text (the mask, not the id, marks a pad)."""
    _, folder = exported[name]
    model, tokenizer = load_exported(folder)
    last = tokenizer.convert_ids_to_tokens(tokenizer.vocab_size - 1)  # the pad character
    prompts = ["To be", f"새가 {last}하늘", "Whether 'tis nobler"]  # 5, 7 and 19 characters
    batch = tokenizer(prompts, padding=True, return_tensors="pt")
    new = 12  # 19 + 12 characters: inside block_size 32
    out = model.generate(**batch, max_new_tokens=new, do_sample=False)
    width = batch.input_ids.shape[1]
    for row, prompt in enumerate(prompts):
        ids = tokenizer(prompt, return_tensors="pt")
        alone = model.generate(**ids, max_new_tokens=new, do_sample=False)
        text = tokenizer.decode(alone[0])
        assert tokenizer.decode(out[row, width - len(prompt) :]) == text, prompt
        assert text.startswith(prompt) and len(text) == len(prompt) + new
    assert batch.attention_mask.tolist()[0] == [0] * 14 + [1] * 5
    assert tokenizer.pad_token == last and tokenizer.padding_side == "left"


def test_tokenizer_encodes_and_decodes_as_ours(exported):
    run, folder = exported["gpt2"]
    _, ours = model_from_checkpoint(load_checkpoint(run / "ckpt.pt"))
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert "새" in ours.chars and "\n" in ours.chars and ours.normalization == "nfc"
    rng = random.Random(0)
    for _ in range(20):
        text = "".join(rng.choices(ours.chars, k=rng.randint(1, 300)))
        ids = theirs(text).input_ids  # no BOS or EOS added
        assert ids == ours.encode(text).tolist()
        assert theirs.decode(ids) == text  # no spaces put between characters
    # As our prompts: Windows line endings and decomposed (NFD) Hangul read as the corpus.
    typed = unicodedata.normalize("NFD", "새가\r\n하늘\r")
    assert theirs(typed).input_ids == ours.encode("새가\n하늘\n").tolist()


@pytest.mark.parametrize("name", RUNS)
def test_a_character_outside_the_vocabulary_reads_as_a_space(exported, name):
    """The issue's "ROMEO: 1 2": digits, "Z" and an emoji (outside the basic plane) are
    not in the vocabulary; each reads as one space, so the model gets text of the same
    length, in-vocabulary ids unchanged, and generates from it."""
    run, folder = exported[name]
    _, ours = model_from_checkpoint(load_checkpoint(run / "ckpt.pt"))
    model, tokenizer = load_exported(folder)
    for text, read_as in [("To be: 1 2", "To be:    "), ("Zebra 🦓\n새", " ebra  \n새")]:
        ids = tokenizer(text, return_tensors="pt").input_ids
        assert ids[0].tolist() == ours.encode(read_as).tolist(), text
        assert tokenizer.decode(ids[0]) == read_as  # where a stand-in stood shows
        out = model.generate(ids, max_new_tokens=5, do_sample=False)
        assert out.shape == (1, len(text) + 5)
    assert model.config.vocab_size == ours.vocab_size  # no id added for it
    assert tokenizer.unk_token is None  # not special: skip_special_tokens keeps spaces
    assert tokenizer.decode(tokenizer("a 1").input_ids, skip_special_tokens=True) == "a  "


def test_a_vocabulary_without_a_space_refuses_other_characters(tmp_path):
    """With no space to stand in, other characters are refused, as tokenizers does, and
    the export's note says so."""
    from hf_export.exporter import vocabulary_note
    from hf_export.tokenizer import transformers_tokenizer

    chars = sorted("\nabc")
    transformers_tokenizer(chars, "none", 16).save_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert theirs("ab\nc").input_ids == [1, 2, 0, 3]
    with pytest.raises(Exception, match="Missing \\[UNK\\]"):
        theirs("a b")
    assert vocabulary_note(chars) == (
        "the tokenizer reads the 4 characters of the vocabulary; it refuses others "
        '("Missing [UNK] token"): the vocabulary has no space to read them as; '
        "find them with set(text) - set(tokenizer.get_vocab())"
    )


def test_the_pad_character_is_read_as_every_other_character(tmp_path):
    """The pad token is found in the normalized text, as the rest is: in an NFC
    vocabulary whose last character is a combining acute accent, "e" + U+0301 still
    reads as "é" (found in the raw text, the accent stayed apart)."""
    from data.tokenizer import CharTokenizer
    from hf_export.tokenizer import transformers_tokenizer

    chars = sorted("\n abe\u00e9\u0301")
    transformers_tokenizer(chars, "nfc", 16).save_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    ours = CharTokenizer(chars, "nfc")
    assert theirs.pad_token == "\u0301" and theirs.padding_side == "left"
    for text in ("be\u0301", "b\u00e9 \u0301a\n", "\u0301e"):
        assert theirs(text).input_ids == ours.encode(text).tolist(), ascii(text)


def hand_made_checkpoint(folder, **architecture):
    model = sharp_model(vocab_size=12, block_size=16, seed=3, **architecture)
    payload = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "vocab": sorted("\n abcdef새가하늘"),
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_checkpoint(payload, folder / "ckpt.pt")
    return model


@pytest.mark.parametrize(
    "architecture, class_name",
    [
        # Far larger activations than a 6-step run's: GELU's tanh approximation, for
        # one, moves these logits by over 1e-5.
        ({}, "GPT2LMHeadModel"),  # tied head, biases
        ({"tie_embeddings": False, "bias": False}, "GPT2LMHeadModel"),
        ({**ROPE, "qk_norm": True, "bias": False, "tie_embeddings": False}, "Qwen3ForCausalLM"),
        ({**ROPE, "rope_base": 500.0}, "LlamaForCausalLM"),  # no QK-norm; biases
    ],
)
def test_exported_logits_of_large_weights_equal_ours(tmp_path, architecture, class_name, capsys):
    ours = hand_made_checkpoint(tmp_path / "run", **architecture)
    assert export.main(["--out-dir", str(tmp_path / "run"), "--to", str(tmp_path / "hf")]) == 0
    # What generates as sample.py past block_size 16, and how to stay within it.
    within = "generate at most 16 characters, prompt included (generate(ids, max_length=16))"
    length_note = {
        "GPT2LMHeadModel": f"GPT2LMHeadModel has no position past block_size 16: {within}",
        "Qwen3ForCausalLM": "Qwen3ForCausalLM slides past block_size 16 as sample.py does: "
        "generate any length",
        "LlamaForCausalLM": "LlamaForCausalLM attends over everything past (unlike sample.py) "
        f"block_size 16: {within}",
    }[class_name]
    vocabulary_note = (
        "the tokenizer reads the 12 characters of the vocabulary; any other character "
        "reads as a space (sample.py refuses it instead): "
        "find them with set(text) - set(tokenizer.get_vocab())"
    )
    assert capsys.readouterr().out.splitlines()[1:] == [length_note, vocabulary_note]
    theirs, _ = load_exported(tmp_path / "hf")
    assert type(theirs).__name__ == class_name
    ids = torch.randint(12, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(theirs(input_ids=ids).logits, ours(ids)[0], atol=1e-5, rtol=0)


def test_qwen3_generates_sample_py_text_past_block_size(tmp_path, capsys):
    # Our rolling KV cache is Qwen3's sliding-window attention: 40 characters past a
    # block_size of 16 agree too.
    hand_made_checkpoint(tmp_path / "run", **ROPE, qk_norm=True, bias=False)
    assert export.main(["--out-dir", str(tmp_path / "run"), "--to", str(tmp_path / "hf")]) == 0
    capsys.readouterr()
    model, tokenizer = load_exported(tmp_path / "hf")
    args = ["--out-dir", str(tmp_path / "run"), "--device", "cpu", "--prompt", "새가 하늘"]
    assert sample.main(args + ["--temperature", "0", "--max-new-tokens", "40", "--no-stream"]) == 0
    ids = tokenizer("새가 하늘", return_tensors="pt").input_ids
    # Without a warning that the model's length is exceeded: it is not (max_position_
    # embeddings is not block_size). warning_once's memory is cleared to see it anew.
    warned = []
    handler = logging.Handler()
    handler.emit = lambda record: warned.append(record.getMessage())
    logging.Logger.warning_once.cache_clear()
    transformers.utils.logging.add_handler(handler)
    try:
        out = model.generate(ids, max_new_tokens=40, do_sample=False)
    finally:
        transformers.utils.logging.remove_handler(handler)
    assert not [w for w in warned if "maximum length" in w], warned
    assert tokenizer.decode(out[0]) == capsys.readouterr().out.removesuffix("\n")


def run_export(capsys, *args):
    code = export.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_block_no_architecture_computes_is_refused_in_one_line(tmp_path, capsys):
    hand_made_checkpoint(tmp_path / "run", position="rope", logit_softcap=15.0)
    code, _, err = run_export(capsys, "--out-dir", tmp_path / "run", "--to", tmp_path / "hf")
    assert code == 2 and err.count("\n") == 1
    assert "GPT2LMHeadModel, needs model.position=learned (this run: rope)" in err
    assert "model.logit_softcap=0.0 (this run: 15.0)" in err
    assert not (tmp_path / "hf").exists()
    # The fix it names retrains this run, with the class's needs, into a folder of its
    # own: not another recipe, which would export as another architecture.
    run = tmp_path / "run"
    (run / "config.yaml").write_text(f"out_dir: {run}\ndata:\n  path: mine.txt\n")
    code, _, err = run_export(capsys, "--out-dir", run, "--to", tmp_path / "hf")
    assert code == 2 and err.count("\n") == 1
    assert err.rstrip().endswith(
        f"to export as GPT2LMHeadModel, train it again with them: python train.py --config "
        f"{run / 'config.yaml'} model.position=learned model.logit_softcap=0.0 "
        f"out_dir={tmp_path / 'run_gpt2'}"
    )


def test_errors_name_the_fix_and_keep_the_users_files(tmp_path, capsys, monkeypatch):
    run, target = tmp_path / "run", tmp_path / "hf"
    code, _, err = run_export(capsys, "--out-dir", run, "--to", target)
    assert code == 2 and "no checkpoint at" in err and "train one first" in err

    hand_made_checkpoint(run)
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    code, _, err = run_export(capsys, "--out-dir", run, "--to", target)
    assert code == 2 and err.count("\n") == 1 and "add --overwrite" in err
    code, _, err = run_export(capsys, "--out-dir", run, "--to", target, "--overwrite")
    assert code == 2 and "notes.txt" in err and "move those files" in err
    assert (target / "notes.txt").read_text() == "mine"

    # --overwrite replaces an earlier export; nothing is left beside it.
    (target / "notes.txt").unlink()
    assert run_export(capsys, "--out-dir", run, "--to", target)[0] == 0
    assert run_export(capsys, "--out-dir", run, "--to", target, "--overwrite")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "run"]
    # The usual permissions of a new file and folder (transformers writes 0600 weights).
    (run / "probe").touch()
    (run / "probe_folder").mkdir()
    assert (target / "model.safetensors").stat().st_mode == (run / "probe").stat().st_mode
    assert target.stat().st_mode == (run / "probe_folder").stat().st_mode

    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails: not installed
    code, _, err = run_export(capsys, "--out-dir", run, "--to", tmp_path / "other")
    assert code == 2 and "pip install transformers==" in err and err.count("\n") == 1


def test_a_failed_export_leaves_no_folder(tmp_path, monkeypatch):
    hand_made_checkpoint(tmp_path / "run")

    def fail(self, folder, **kwargs):
        (folder / "config.json").write_text("{")
        raise OSError("disk full")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", fail)
    with pytest.raises(OSError, match="disk full"):
        export.main(["--out-dir", str(tmp_path / "run"), "--to", str(tmp_path / "hf")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_sample_and_export_start_without_transformers():
    heavy = "{'transformers', 'tokenizers'}"
    code = f"import sys, export, sample; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_sigterm_during_the_export_leaves_no_folder(tmp_path, monkeypatch):
    """`kill` while the weights are written used to end the process and leave the
    temporary folder, as large as the model, beside the target."""
    import signal

    hand_made_checkpoint(tmp_path / "run")
    real = transformers.PreTrainedModel.save_pretrained

    def killed_while_saving(self, folder, **kwargs):
        real(self, folder, **kwargs)
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", killed_while_saving)
    with pytest.raises(SystemExit) as stopped:
        export.main(["--out-dir", str(tmp_path / "run"), "--to", str(tmp_path / "hf")])
    assert stopped.value.code == 128 + signal.SIGTERM
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
