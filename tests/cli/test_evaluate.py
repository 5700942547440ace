"""evaluate.py and the whole-split numbers: the final validation figure of a run, the
same figure from evaluate.py, a test split that training never reads."""

import copy
import subprocess
import sys

import numpy as np
import pytest
import torch

import data.batches
import evaluate
from data import CorpusError
from model.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from tests.conftest import ROOT, TEST_DEVICE, read_scalars, shakespeare, tiny_overrides
from training import ConfigError, load_config, train
from training.checkpoint import check_resume
from viz.run_events import VAL_FULL_BPC, VAL_FULL_LOSS


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """A tiny run whose periodic evaluation scores only a sample of the validation
    split (train.eval_tokens=1024), so the final whole-split figure is its own, with a
    test split held out."""
    tmp_path = tmp_path_factory.mktemp("sampled")
    overrides = {"train.eval_tokens": 1024, "data.test_fraction": 0.05}
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare(), **overrides))
    return cfg, train(cfg)


def run_evaluate(*args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "evaluate.py"), "--device", "cpu", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", cwd=ROOT)


def test_the_final_whole_split_number_is_logged_and_differs_from_the_sample(sampled_run):
    cfg, result = sampled_run
    periodic = result.evals[-1]["val_loss"]
    assert result.full_val_loss is not None and np.isfinite(result.full_val_loss)
    assert result.full_val_loss != periodic  # 1,024 characters are not 111,540
    scalars = read_scalars(result.out_dir)
    assert scalars[VAL_FULL_LOSS] == [(6, pytest.approx(result.full_val_loss, rel=1e-6))]
    assert scalars[VAL_FULL_BPC][0][1] == pytest.approx(result.full_val_loss / np.log(2), 1e-6)


def test_evaluate_gives_the_training_runs_whole_split_number(sampled_run):
    cfg, result = sampled_run
    # On the device the run trained on: the same windows, batches, weights and kernels.
    score = evaluate.score_split(cfg.out_dir, split="val", device_name=TEST_DEVICE.type)
    assert score.loss == result.full_val_loss
    assert score.characters == 111_541 and score.iter_num == 6
    test = evaluate.score_split(cfg.out_dir, split="test", device_name="cpu")
    assert test.characters == 55_769 and np.isfinite(test.loss) and test.loss != score.loss
    r = run_evaluate("--out-dir", cfg.out_dir, "--split", "test")
    assert r.returncode == 0, r.stderr
    assert f"test split, 55,769 characters: {test.loss:.4f} nats/char" in r.stdout
    assert f"{test.bits_per_character:.4f} bits/char" in r.stdout


def test_evaluate_reads_a_checkpoint_older_than_the_new_keys(sampled_run, tmp_path):
    cfg, result = sampled_run
    ckpt = load_checkpoint(result.out_dir / "ckpt.pt")
    for key in ("include", "separator", "test_fraction"):
        del ckpt["config"]["data"][key]
    del ckpt["config"]["train"]["eval_tokens"]
    ckpt["config"]["train"]["retired_key"] = 1  # a key this version no longer has
    ckpt.pop("format_version")
    save_checkpoint(ckpt, tmp_path / "old.pt")
    score = evaluate.score_split(cfg.out_dir, str(tmp_path / "old.pt"), device_name="cpu")
    assert score.characters == 111_540  # the split as it was without a test split
    with pytest.raises(CorpusError, match="no test split .*use --split val.*data.test_fraction"):
        evaluate.score_split(cfg.out_dir, str(tmp_path / "old.pt"), "test", "cpu")
    # The run's own config, trained again with a test split into a folder of its own.
    old_run = tmp_path / "old_run"
    old_run.mkdir()
    save_checkpoint(ckpt, old_run / "ckpt.pt")
    (old_run / "config.yaml").write_text(f"out_dir: {old_run}\n", encoding="utf-8")
    with pytest.raises(CorpusError) as e:
        evaluate.score_split(old_run, "ckpt.pt", "test", "cpu")
    assert str(e.value).endswith(
        f"python train.py --config {old_run / 'config.yaml'} data.test_fraction=0.05 "
        f"out_dir={old_run}_test"
    )


def test_evaluate_errors_name_the_fix(sampled_run, tmp_path, capsys):
    cfg, _ = sampled_run
    other = tmp_path / "other.txt"
    other.write_text("ROMEO: hello\x01 and ünïcode " * 20, encoding="utf-8")
    r = run_evaluate("--out-dir", cfg.out_dir, "--data-path", other)
    assert r.returncode == 2 and r.stderr.startswith("error: ")
    assert "3 character(s) are not in the model's vocabulary of 65" in r.stderr
    assert "'\\x01' (U+0001)" in r.stderr and "'ü' (U+00FC)" in r.stderr
    readable = tmp_path / "readable.txt"
    readable.write_text("ROMEO: What say you, my lord?\n" * 40, encoding="utf-8")
    score = evaluate.score_split(cfg.out_dir, data_path=str(readable), device_name="cpu")
    assert score.characters == 120 and np.isfinite(score.loss)  # ids translated
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        evaluate.score_split(str(tmp_path / "no_run"), device_name="cpu")
    assert evaluate.main(["--out-dir", cfg.out_dir, "--batch-size", "0"]) == 2
    assert "--batch-size must be >= 1" in capsys.readouterr().err


def test_a_resume_must_keep_the_test_fraction(sampled_run):
    cfg, result = sampled_run
    ckpt = load_checkpoint(result.out_dir / "ckpt.pt")
    changed = copy.deepcopy(cfg)
    changed.data.test_fraction = 0.1
    with pytest.raises(ConfigError, match="data.test_fraction is 0.1 but the run used 0.05"):
        check_resume(ckpt, changed, ckpt["vocab"], result.out_dir / "ckpt.pt")


def test_the_test_split_is_never_read_by_training(tmp_path, monkeypatch):
    """A corpus whose test split is a character found nowhere else: no training batch,
    no evaluation window and no logged sample ever holds it."""
    rng = np.random.default_rng(0)
    body = "".join(rng.choice(list("abcdefgh \n"), 2_970))
    path = tmp_path / "corpus.txt"
    path.write_text(body + "Z" * 330, encoding="utf-8")  # test_fraction 0.1 of 3,300
    seen = []
    real_read = data.batches.WindowReader.read

    def recording_read(self, starts):
        windows = real_read(self, starts)
        seen.append(windows)
        return windows

    monkeypatch.setattr(data.batches.WindowReader, "read", recording_read)
    overrides = {"data.test_fraction": 0.1, "train.sample_prompt": "ab", "train.eval_tokens": 64}
    overrides["train.attention_prompt"] = "ab"  # of the corpus: no fallback, no warning
    result = train(load_config(None, tiny_overrides(tmp_path, path, **overrides)))
    assert result.full_val_loss is not None  # the whole validation split was read too
    vocab = load_checkpoint(tmp_path / "run" / "ckpt.pt")["vocab"]
    z = vocab.index("Z")
    read = torch.cat([w.flatten() for w in seen])
    assert len(read) > 6 * 8 * 33 and z not in read.tolist()
    score = evaluate.score_split(str(tmp_path / "run"), split="test", device_name="cpu")
    assert score.characters == 330 and score.loss > 1.0  # Z was never trained on


def test_data_path_errors_name_the_flag(sampled_run, tmp_path):
    """A corpus given with --data-path is named by that flag, not by the config key."""
    cfg, _ = sampled_run
    r = run_evaluate("--out-dir", cfg.out_dir, "--data-path", tmp_path / "missing.txt")
    assert r.returncode == 2
    assert f"error: --data-path: no such file or folder: {tmp_path / 'missing.txt'}" in r.stderr
    assert "data.path" not in r.stderr
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError) as e:
        evaluate.score_split(cfg.out_dir, data_path=str(tmp_path / "empty"), device_name="cpu")
    assert str(e.value).startswith("--data-path: ") and "data.path" not in str(e.value)
