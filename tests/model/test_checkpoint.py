"""training/checkpoint.py: atomic saves, clear errors for bad files, resume checks."""

import pytest
import torch

from model import GPT, GPTConfig
from model.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    load_checkpoint,
    model_from_checkpoint,
    save_checkpoint,
)
from tests.conftest import tiny_overrides
from training import ConfigError, load_config, train


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint({"iter_num": 1, "w": torch.ones(3)}, path)
    real_save = torch.save

    def save_half_then_fail(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.truncate(f.tell() // 2)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", save_half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint({"iter_num": 2, "w": torch.zeros(3)}, path)
    monkeypatch.undo()
    ckpt = load_checkpoint(path)
    assert ckpt["iter_num"] == 1 and torch.equal(ckpt["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary file left


def test_corrupt_checkpoints_name_the_file(tmp_path):
    good = tmp_path / "good.pt"
    save_checkpoint({"iter_num": 1, "w": torch.randn(1000)}, good)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:1000])
    text = tmp_path / "text.pt"
    text.write_text("not a checkpoint", encoding="utf-8")
    for path in (truncated, text):
        with pytest.raises(CheckpointError, match=str(path)):
            load_checkpoint(path)
    future = tmp_path / "future.pt"
    torch.save({"format_version": CHECKPOINT_FORMAT + 1}, future)
    with pytest.raises(CheckpointError, match=f"format {CHECKPOINT_FORMAT + 1}"):
        load_checkpoint(future)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def _weights_payload(model: GPT, vocab: list[str]) -> dict:
    return {"model": model.state_dict(), "model_config": vars(model.config), "vocab": vocab}


def test_compiled_prefix_and_vocabulary_checks(tmp_path):
    vocab = list("abcdefgh")
    model = GPT(GPTConfig(vocab_size=8, block_size=8, n_layer=1, n_head=1, n_embd=8))
    payload = _weights_payload(model, vocab)
    payload["model"] = {f"_orig_mod.{k}": v for k, v in payload["model"].items()}
    save_checkpoint(payload, tmp_path / "compiled.pt")
    loaded, tokenizer = model_from_checkpoint(load_checkpoint(tmp_path / "compiled.pt"))
    assert tokenizer.chars == vocab
    torch.testing.assert_close(loaded.token_embedding.weight, model.token_embedding.weight)

    wrong = _weights_payload(model, vocab[:7])  # one character short of the embedding
    save_checkpoint(wrong, tmp_path / "wrong.pt")
    with pytest.raises(CheckpointError, match="vocabulary has 7 characters"):
        model_from_checkpoint(load_checkpoint(tmp_path / "wrong.pt"), tmp_path / "wrong.pt")


def test_resume_refuses_a_different_model_or_corpus(tmp_path, shakespeare_path):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 2})))
    bigger = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "model.block_size": 64}
    )
    with pytest.raises(ConfigError, match="model.block_size is 64 but the checkpoint has 32"):
        train(load_config(None, bigger))
    other = tmp_path / "other.txt"
    other.write_text("xyz " * 500, encoding="utf-8")
    with pytest.raises(ConfigError, match="vocabulary"):
        train(load_config(None, tiny_overrides(tmp_path, other, **{"train.resume": True})))
    with pytest.raises(ConfigError, match="no checkpoint"):
        train(load_config(None, tiny_overrides(tmp_path / "new", other, **{"train.resume": True})))


def test_resume_checks_and_reports_changed_settings(tmp_path, shakespeare_path, capsys):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 3})))
    config_before = (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match="data.val_fraction is 0.2 but the run used 0.1"):
        train(
            load_config(
                None,
                tiny_overrides(
                    tmp_path, shakespeare_path, **{"train.resume": True, "data.val_fraction": 0.2}
                ),
            )
        )
    nothing = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "train.max_iters": 2}
    )
    assert train(load_config(None, nothing)).iter_num == 3
    assert (tmp_path / "run" / "config.yaml").read_text(encoding="utf-8") == config_before
    capsys.readouterr()
    changed = tiny_overrides(
        tmp_path, shakespeare_path, **{"train.resume": True, "train.learning_rate": 0.002}
    )
    train(load_config(None, changed))
    assert "train.learning_rate: 0.001 -> 0.002" in capsys.readouterr().out
