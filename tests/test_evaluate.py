"""training/evaluate.py: evaluation runs in eval mode (no dropout) and restores the mode."""

import pytest
import torch

from model import GPT, GPTConfig
from training.evaluate import summed_loss


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
