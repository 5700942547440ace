"""What the page's and the explorer's tests share: a small GPT with sharp attention
(`sharp_model`), its checkpoint, the vocabulary and prompt it is asked about, a
GPT-2 block and a modern one (the `model` fixture), a parser for the explorer's table,
and one headless Chromium per test worker for the browser tests (`browser`, `page`)."""

import dataclasses
import math
import os
import re

import pytest
import torch

import tests.conftest
from model import GPT, GPTConfig
from model.checkpoint import save_checkpoint
from tests.viz.browser import Page, browser_missing, open_browser
from training.snapshots import SnapshotKeeper

PROMPT = "새가 하늘을 날았다"
VOCAB = sorted(set(PROMPT + "To be, or not"))
NUMBER = re.compile(r"\d+\.\d+")


def sharp_model() -> GPT:
    """A small GPT whose attention is far from uniform (large query/key weights), so a
    table of the wrong weights cannot pass for the right one by accident."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(VOCAB), block_size=16, n_layer=2, n_head=3, n_embd=24))
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv_proj.weight.normal_(0.0, 1.0)
    return model.eval()


def save_sharp_checkpoint(path) -> GPT:
    """Write `sharp_model` (vocabulary VOCAB) as a checkpoint at ``path``; returns the model."""
    model = sharp_model()
    payload = {
        "model": model.state_dict(),
        "model_config": vars(model.config).copy(),
        "vocab": VOCAB,
        "config": {},
        "iter_num": 0,
        "best_val_loss": math.inf,
    }
    save_checkpoint(payload, path)
    return model


@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    return save_sharp_checkpoint(path), path


def ids_of(text: str) -> torch.Tensor:
    return torch.tensor([VOCAB.index(c) for c in text])


SNAPSHOT_VOCAB = list(" abcdefgh")


def write_snapshot_run(folder, steps=(5, 50)) -> dict[int, GPT]:
    """A run folder holding one snapshot per step (training/snapshots.py's writer), each
    of a differently seeded tiny GPT on SNAPSHOT_VOCAB (its float32 weights rounded to
    float16 as a snapshot stores them); the last step is marked best. Returns
    {step: the model before rounding}."""
    config = GPTConfig(
        n_layer=2, n_head=2, n_embd=16, block_size=16, vocab_size=len(SNAPSHOT_VOCAB)
    )
    keeper = SnapshotKeeper(folder, max_iters=max(steps), count=0, start=0)
    keeper.count = 1  # take exactly the steps given
    models = {}
    for step in steps:
        torch.manual_seed(step)
        model = GPT(config)
        contents = {
            "model_config": dataclasses.asdict(config),
            "vocab": SNAPSHOT_VOCAB,
            "normalization": "none",
            "iter_num": step,
        }
        best = step == max(steps)
        keeper.take(step, contents, model, 4.0 - step / 100, 8192, f"sample {step}", best)
        models[step] = model
    return models


def parse_table(out: str, T: int) -> list[list[float]]:
    """The numbers of each table row (the weights, then the row sum)."""
    rows = [line for line in out.splitlines() if re.match(r"^\s*\d+ \S", line)]
    assert len(rows) == T, out
    return [[float(x) for x in NUMBER.findall(line)] for line in rows]


MODERN = {"position": "rope", "norm": "rmsnorm", "qk_norm": True, "bias": False}


def modern_model() -> GPT:
    """RoPE, RMSNorm, QK-norm, ReLU² and a soft cap on VOCAB (2 layers, 3 heads of 8
    channels): every option the block and the logit attribution read."""
    extra = {"activation": "relu2", "logit_softcap": 5.0, "tie_embeddings": False}
    return tests.conftest.sharp_model(
        len(VOCAB), 16, n_layer=2, n_head=3, n_embd=24, **MODERN, **extra
    )


@pytest.fixture(params=["gpt2", "modern"])
def model(request) -> GPT:
    """`sharp_model` (learned positions, LayerNorm, GELU), then `modern_model`."""
    return sharp_model() if request.param == "gpt2" else modern_model()


BROWSER_MISSING = browser_missing()
IN_CI = os.environ.get("CI", "").lower() == "true"
# The marks of a browser test module: slow, and skipped where Chromium or selenium is
# missing, except under CI=true (.ci/run installs them, so there a missing one fails).
BROWSER_TEST = [
    pytest.mark.slow,
    pytest.mark.skipif(BROWSER_MISSING is not None and not IN_CI, reason=BROWSER_MISSING or ""),
]


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (a selenium WebDriver, 1200 x 1000 px) per test worker:
    starting it takes seconds, and each test opens its own page in it.

    Raises:
        pytest.fail: under CI=true when Chromium or selenium is missing.
    """
    if BROWSER_MISSING is not None:
        pytest.fail(f"CI=true and {BROWSER_MISSING}; .ci/run installs it")
    driver = open_browser()
    yield driver
    driver.quit()


@pytest.fixture
def page(browser) -> Page:
    """The shared browser as a `Page`, its network and console logs emptied first (the
    checks read them: an earlier test's requests to its own server are not this one's)."""
    browser.get_log("performance")
    browser.get_log("browser")
    return Page(browser)
