"""model/scoring.py and training/evaluate.py: evaluation runs in eval mode (no dropout)
and restores the mode.

Evaluation's memory does not grow past a training step's with the vocabulary: the
largest logits tensor an evaluation makes, counted by a forward hook on lm_head, is
no larger than a training micro-step's (it was train.eval_batch_size / batch_size
times larger), and the losses are those of one full evaluation batch.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from data.corpus import Corpus
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.scoring import EVAL_LOGITS_FLOOR, rows_per_forward, summed_loss
from training.config import load_config
from training.distributed import DistContext
from training.evaluate import Evaluator


def test_dropout_is_off_during_evaluation():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.5)
    )
    model.train()
    x = torch.randint(0, 20, (4, 16))
    y = torch.randint(0, 20, (4, 16))
    total, count = summed_loss(model, x, y, 2, torch.device("cpu"))
    a = total.item() / count  # mean loss, nats per character
    b = summed_loss(model, x, y, 4, torch.device("cpu"))[0].item() / count
    assert a == pytest.approx(b, abs=1e-6)
    assert model.training  # the previous mode is restored
    with torch.no_grad():
        assert model(x, y)[1].item() != pytest.approx(a, abs=1e-4)  # dropout is active in training


VOCAB = 30_000  # a CJK-sized character vocabulary
T = 16


def fake_corpus(vocab: int) -> Corpus:
    rng = np.random.default_rng(0)
    chars = [chr(0x4E00 + i) for i in range(vocab)]
    ids = rng.integers(0, vocab, size=6_000).astype(np.uint16)
    return Corpus(CharTokenizer(chars, "none"), ids[:5_000], ids[5_000:], Path("fake"), "")


def largest_logits(model: GPT, run) -> int:
    """The most elements of any (B, T, vocab_size) logits tensor made during ``run()``."""
    sizes = []
    hook = model.lm_head.register_forward_hook(lambda _m, _i, out: sizes.append(out.numel()))
    try:
        run()
    finally:
        hook.remove()
    return max(sizes)


def evaluation_setup(eval_batch_size: int):
    overrides = [f"model.block_size={T}", "model.n_layer=1", "model.n_head=2", "model.n_embd=16"]
    overrides += ["train.batch_size=4", f"train.eval_batch_size={eval_batch_size}"]
    overrides += ["train.eval_tokens=1000", "train.eval_train_tokens=1000"]
    cfg = load_config(None, overrides)
    cfg.model.vocab_size = VOCAB
    torch.manual_seed(0)
    model = GPT(GPTConfig(**vars(cfg.model)))
    corpus = fake_corpus(VOCAB)
    return cfg, model, corpus, Evaluator(corpus, cfg, DistContext(), torch.device("cpu"))


def test_evaluation_logits_stay_within_a_training_steps_at_a_large_vocabulary(monkeypatch):
    # No floor, so that a test-sized model shows what a 100,000-character one would.
    monkeypatch.setattr("model.scoring.EVAL_LOGITS_FLOOR", 0)
    cfg, model, corpus, evaluator = evaluation_setup(eval_batch_size=128)
    x = torch.from_numpy(corpus.train_ids[: 4 * T].astype(np.int64)).view(4, T)
    training = largest_logits(model, lambda: model(x, x)[1].backward())
    assert training == 4 * T * VOCAB
    evaluating = largest_logits(model, lambda: evaluator.losses(model))
    assert evaluating == training  # was 128 x T x VOCAB: 32 times more
    assert "evaluation runs 4 windows per forward pass, not train.eval_batch_size=128" in (
        evaluator.note
    )

    # The losses are those of whole 128-window batches, to far below the printed digits.
    _, _, _, whole = evaluation_setup(eval_batch_size=128)
    whole.batch_size = 128
    expected = whole.losses(model)
    got = evaluator.losses(model)
    for split in ("val", "train"):
        assert got[split] == pytest.approx(expected[split], abs=1e-6)
        assert f"{got[split]:.4f}" == f"{expected[split]:.4f}"


def test_the_models_vocabulary_sizes_the_rows_not_the_scored_corpus():
    """evaluate.py --data-path scores a corpus with fewer characters than the model's."""
    cfg, _, _, _ = evaluation_setup(eval_batch_size=128)
    small = Evaluator(fake_corpus(100), cfg, DistContext(), torch.device("cpu"))
    # VOCAB-wide logits, as the model makes them: 34 windows fill EVAL_LOGITS_FLOOR.
    assert small.batch_size == EVAL_LOGITS_FLOOR // (T * VOCAB) == 34


@pytest.mark.parametrize(
    ("vocab", "expected"), [(65, 128), (2_000, 128), (8_000, 32), (69_498, 32), (10**6, 32)]
)
def test_rows_per_forward_keeps_a_character_vocabularys_batch(vocab, expected):
    """Tiny Shakespeare (65) and a Korean corpus (2,000) keep the 128 windows; the CJK
    corpus of issue 23 (69,498 at block_size 64) evaluates 32, a training batch."""
    assert rows_per_forward(128, 32, 64, vocab) == expected
    rows = rows_per_forward(128, 32, 64, vocab)
    assert rows * 64 * vocab <= max(32 * 64 * vocab, EVAL_LOGITS_FLOOR)
