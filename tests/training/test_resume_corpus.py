"""A resume on a corpus that changed since the checkpoint (a file added, lines of one
shuffled) is refused, naming what changed and the key that goes on anyway; it used to
go on without a word. A checkpoint written before corpus records still resumes."""

import random

import pytest
import torch

from model.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train
from training.checkpoint import CORPUS_KEY
from training.config import ConfigError


@pytest.fixture
def corpus_folder(tmp_path, shakespeare_path):
    """Two files of Tiny Shakespeare, 40,000 characters each."""
    text = shakespeare_path.read_text(encoding="utf-8")
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text(text[:40_000], encoding="utf-8")
    (folder / "b.txt").write_text(text[40_000:80_000], encoding="utf-8")
    return folder


def run(tmp_path, corpus, **extra):
    overrides = tiny_overrides(tmp_path, corpus, **{"train.max_iters": 2, **extra})
    return train(load_config(None, overrides))


def resume(tmp_path, corpus, **extra):
    return run(tmp_path, corpus, **{"train.resume": True, "train.max_iters": 3, **extra})


def test_a_file_added_to_the_corpus_is_refused_then_accepted(tmp_path, corpus_folder, capsys):
    run(tmp_path, corpus_folder)
    text = (corpus_folder / "a.txt").read_text(encoding="utf-8")
    (corpus_folder / "c.txt").write_text(text[:20_000], encoding="utf-8")  # same characters
    with pytest.raises(ConfigError) as refused:
        resume(tmp_path, corpus_folder)
    message = str(refused.value)
    assert "the corpus has changed since the checkpoint was written" in message
    assert "files added: c.txt" in message
    assert "the validation split's text differs (8,001 -> 10,001 characters)" in message
    assert "train.accept_changed_corpus=true" in message
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 2  # nothing lost

    capsys.readouterr()
    assert resume(tmp_path, corpus_folder, **{"train.accept_changed_corpus": True}).iter_num == 3
    out = capsys.readouterr().out
    assert "note: train.accept_changed_corpus=true: resuming on a corpus that changed" in out
    assert "files added: c.txt" in out
    assert "the best validation loss starts over on the new split" in out
    assert "train.accept_changed_corpus: False -> True" not in out  # not a "changed setting"
    # The checkpoint now records the corpus as it is: the next resume needs no key.
    assert resume(tmp_path, corpus_folder, **{"train.max_iters": 4}).iter_num == 4


def test_lines_shuffled_in_one_file_are_refused(tmp_path, corpus_folder):
    run(tmp_path, corpus_folder)
    lines = (corpus_folder / "b.txt").read_text(encoding="utf-8").split("\n")
    random.Random(0).shuffle(lines)
    (corpus_folder / "b.txt").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConfigError, match="files changed: b.txt") as refused:
        resume(tmp_path, corpus_folder)
    assert "the validation split's text differs (same length)" in str(refused.value)


def test_a_renamed_file_that_leaves_the_text_as_it_was_resumes(tmp_path, corpus_folder):
    run(tmp_path, corpus_folder)
    (corpus_folder / "b.txt").rename(corpus_folder / "b2.txt")  # still read second
    assert resume(tmp_path, corpus_folder).iter_num == 3


def test_a_checkpoint_without_a_corpus_record_resumes_with_a_note(tmp_path, corpus_folder, capsys):
    run(tmp_path, corpus_folder)
    path = tmp_path / "run" / "ckpt.pt"
    old = torch.load(path, weights_only=True)
    del old[CORPUS_KEY]
    del old["format_version"]
    save_checkpoint(old, path)
    capsys.readouterr()
    assert resume(tmp_path, corpus_folder).iter_num == 3
    assert (
        capsys.readouterr().out.count("was written before checkpoints recorded their corpus") == 1
    )
    assert CORPUS_KEY in load_checkpoint(path)


def test_after_an_accepted_change_the_best_is_judged_on_the_new_split(tmp_path, corpus_folder):
    """The old split's best validation loss does not compare with the new split's: it
    starts over, and best.pt holds the best model on the split as it is now (it used to
    keep the old step's model, worse on the new split; fairseq#1302)."""
    run(tmp_path, corpus_folder)
    ckpt_path = tmp_path / "run" / "ckpt.pt"
    ckpt = load_checkpoint(ckpt_path)
    ckpt["best_val_loss"] = 0.5  # a best no model here reaches on any split
    save_checkpoint({k: v for k, v in ckpt.items() if k != "format_version"}, ckpt_path)
    text = (corpus_folder / "a.txt").read_text(encoding="utf-8")
    (corpus_folder / "c.txt").write_text(text[:20_000], encoding="utf-8")
    result = resume(tmp_path, corpus_folder, **{"train.accept_changed_corpus": True})
    assert result.best_val_loss == result.evals[-1]["val_loss"] > 0.5
    assert load_checkpoint(ckpt_path)["best_val_loss"] == result.best_val_loss
    assert load_checkpoint(tmp_path / "run" / "best.pt")["iter_num"] == 3
