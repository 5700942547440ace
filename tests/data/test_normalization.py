"""Unicode normalisation: an NFD corpus and NFC prompts (and the other way round) meet
in one form, recorded in the checkpoint; cuts never split a character."""

import dataclasses
import unicodedata
import warnings

import numpy as np
import pytest
import torch

import sample
from data import CharTokenizer, CorpusError, prepare_corpus
from data.normalization import continues_cluster, joins_previous, safe_cut
from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from tests.conftest import tiny_overrides
from training import ConfigError, load_config, train
from training.run_writer import PromptFallbackWarning, usable_prompt

PROMPT = "새가 하늘을"


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@pytest.fixture(scope="module")
def korean_nfd_file(tmp_path_factory, korean_path):
    """The first 20,000 characters of the Korean corpus, saved decomposed (as macOS
    writes it), with the prompt's syllables guaranteed to occur."""
    text = korean_path.read_text(encoding="utf-8")[:20_000] + "\n" + PROMPT + "\n"
    path = tmp_path_factory.mktemp("nfd") / "korean_nfd.txt"
    path.write_text(nfd(text), encoding="utf-8")
    return path


def test_nfd_corpus_is_read_as_nfc_by_default(korean_nfd_file, tmp_path):
    corpus = prepare_corpus(korean_nfd_file, 0.1, tmp_path / "cache")
    text = nfc(korean_nfd_file.read_text(encoding="utf-8"))
    tok = corpus.tokenizer
    assert tok.normalization == "nfc"
    assert tok.chars == sorted(set(text))
    assert tok.decode(corpus.train_ids) + tok.decode(corpus.val_ids) == text
    # An NFC prompt and its NFD spelling are the same token ids.
    np.testing.assert_array_equal(tok.encode(PROMPT), tok.encode(nfd(PROMPT)))
    assert len(tok.encode(nfd(PROMPT))) == len(PROMPT)


def test_none_keeps_code_points_and_the_message_names_normalisation(korean_nfd_file, tmp_path):
    corpus = prepare_corpus(korean_nfd_file, 0.1, tmp_path / "cache", normalization="none")
    tok = corpus.tokenizer
    assert tok.vocab_size < 200  # jamo, not syllables
    assert len(tok.encode(nfd(PROMPT))) == len(nfd(PROMPT))
    with pytest.raises(CorpusError) as e:
        tok.encode(PROMPT)
    message = str(e.value)
    assert "'새' (U+C0C8)" in message
    assert "normalisation to NFD" in message and "data.normalization=nfc" in message


def test_cache_depends_on_the_normalisation(korean_nfd_file, tmp_path):
    composed = prepare_corpus(korean_nfd_file, 0.1, tmp_path / "cache", normalization="nfc")
    kept = prepare_corpus(korean_nfd_file, 0.1, tmp_path / "cache", normalization="none")
    assert composed.tokenizer.vocab_size != kept.tokenizer.vocab_size
    assert len(list((tmp_path / "cache").iterdir())) == 2
    again = prepare_corpus(korean_nfd_file, 0.1, tmp_path / "cache", normalization="none")
    assert again.tokenizer.normalization == "none" and again.tokenizer.chars == kept.tokenizer.chars


def test_unknown_normalisation_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="data.normalization must be one of nfc, nfkc"):
        load_config(None, ["data.normalization=NFC2"])


@pytest.fixture(scope="module")
def nfc_checkpoint(tmp_path_factory):
    """A hand-built checkpoint of a model whose corpus was normalised to NFC."""
    chars = sorted(set("\n " + PROMPT + "다."))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(chars), block_size=16, n_layer=1, n_head=2, n_embd=16))
    folder = tmp_path_factory.mktemp("run")
    save_checkpoint(
        {
            "model": model.state_dict(),
            "model_config": dataclasses.asdict(model.config),
            "vocab": chars,
            "normalization": "nfc",
        },
        folder / "ckpt.pt",
    )
    return folder


def test_sample_applies_the_checkpoint_normalisation_to_prompt_file_and_stop(
    nfc_checkpoint, tmp_path, capsys
):
    common = ["--out-dir", str(nfc_checkpoint), "--device", "cpu", "--max-new-tokens", "30"]
    common += ["--temperature", "0", "--no-stream"]
    assert sample.main([*common, "--prompt", PROMPT]) == 0
    composed = capsys.readouterr().out
    assert composed.startswith(PROMPT)
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text(nfd(PROMPT), encoding="utf-8")
    assert sample.main([*common, "--prompt-file", str(prompt_file)]) == 0
    assert capsys.readouterr().out == composed  # shown and read as NFC
    # A stop string typed in NFD matches the NFC text the model writes.
    generated = composed[len(PROMPT) :]
    stop = next(c for c in generated if c in "새가하늘을")
    assert sample.main([*common, "--prompt", PROMPT, "--stop", nfd(stop)]) == 0
    assert capsys.readouterr().out == PROMPT + generated[: generated.index(stop)] + "\n"


def test_checkpoint_without_normalisation_reads_as_none(nfc_checkpoint, tmp_path):
    ckpt = load_checkpoint(nfc_checkpoint / "ckpt.pt")
    assert model_from_checkpoint(ckpt)[1].normalization == "nfc"
    del ckpt["normalization"]  # as written before the key existed
    assert model_from_checkpoint(ckpt)[1].normalization == "none"


def test_run_records_normalisation_and_resume_refuses_another(korean_nfd_file, tmp_path):
    overrides = tiny_overrides(tmp_path, korean_nfd_file, **{"train.max_iters": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PromptFallbackWarning)
        train(load_config(None, overrides))
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert ckpt["normalization"] == "nfc" and ckpt["config"]["data"]["normalization"] == "nfc"
    assert "새" in ckpt["vocab"]
    resumed = overrides + ["train.resume=true", "train.max_iters=4", "data.normalization=none"]
    with pytest.raises(ConfigError, match="data.normalization is none but the run used nfc"):
        train(load_config(None, resumed))


def test_safe_cut_keeps_characters_whole():
    decomposed = nfd("새가")  # ᄉ ᅢ ᄀ ᅡ
    assert [safe_cut(decomposed, n) for n in range(5)] == [0, 0, 2, 2, 4]
    assert safe_cut(nfd("각"), 2) == 0  # ᄀ ᅡ ᆨ: a final consonant too
    assert safe_cut("e\u0301x", 1) == 0 and safe_cut("e\u0301x", 2) == 2  # combining accent
    assert safe_cut("a\r\nb", 2) == 1  # CRLF is one newline
    assert safe_cut("abc", 10) == 3
    assert joins_previous("ᄉ", "ᅢ") and not joins_previous("새", "ᄀ")
    assert continues_cluster("ᅢ") and continues_cluster("\u0301") and not continues_cluster("ᄀ")


def test_prompt_fallback_never_cuts_a_syllable():
    # Decomposed validation text with no newline, starting inside a syllable.
    val_text = nfd("새가 하늘을 날았다 " * 4)[1:]
    tok = CharTokenizer.from_text(val_text, "none")
    val_ids = tok.encode(val_text)
    for prompt in ("ROMEO:", "To be", "abcdefg", "R", "Zy"):
        with pytest.warns(PromptFallbackWarning):
            replacement = usable_prompt(prompt, tok, val_ids, "train.sample_prompt")
        assert replacement and len(replacement) <= max(len(prompt), 3)
        assert not continues_cluster(replacement[0])
        rest = val_text[val_text.index(replacement) + len(replacement) :]
        assert not rest or not joins_previous(replacement[-1], rest[0])
    with pytest.warns(PromptFallbackWarning, match="using its first 2"):
        cropped = usable_prompt(nfd("새가"), tok, val_ids, "train.attention_prompt", max_chars=3)
    assert cropped == nfd("새")
