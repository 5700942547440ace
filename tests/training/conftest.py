"""What the training tests share: a real signal raised at a chosen batch (`SignalAt`),
one uninterrupted 10-step run with snapshots (`straight_run`), which the interrupted
and resumed runs of test_loop_signals.py and test_snapshots.py must equal bit for bit,
and one two-rank torchrun job (`ddp_job`) whose parts four files' tests read. Each is
made once per session."""

import signal
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, shakespeare, tiny_overrides, torchrun
from training import load_config, train
from training.report import TrainResult

# Dropout on (its random stream must resume too), a schedule that decays within the
# run, snapshots at steps 1, 2, 3, 4, 6 and 10 each with an 8-character sample.
STRAIGHT = {
    "model.dropout": 0.1,
    "train.lr_decay_iters": 10,
    "train.warmup_iters": 3,
    "train.max_iters": 10,
    "train.snapshots": 6,
    "train.sample_tokens": 8,
}
# The tests that read straight_run run in one pytest-xdist worker, which trains it once.
SHARES_STRAIGHT_RUN = pytest.mark.xdist_group("training_straight_run")


class SignalAt:
    """Wraps a batch sampler's next_batch so that call ``at`` raises the real signal
    ``sig`` (as Ctrl-C or kill would, mid-run)."""

    def __init__(self, next_batch, at: int, sig: signal.Signals):
        self.next_batch, self.at, self.sig, self.calls = next_batch, at, sig, 0

    def __call__(self):
        self.calls += 1
        if self.calls == self.at:
            signal.raise_signal(self.sig)
        return self.next_batch()


@pytest.fixture(scope="session")
def straight_run(tmp_path_factory) -> TrainResult:
    """The uninterrupted run of `STRAIGHT`'s settings on Tiny Shakespeare (its folder
    is ``.out_dir``); mark a test that reads it with `SHARES_STRAIGHT_RUN`."""
    tmp = tmp_path_factory.mktemp("straight")
    return train(load_config(None, tiny_overrides(tmp, shakespeare(), **STRAIGHT)))


# The tests that read ddp_job run in one pytest-xdist worker, which runs the job once.
SHARES_DDP_JOB = pytest.mark.xdist_group("training_ddp_job")


@pytest.fixture(scope="session")
def ddp_job(tmp_path_factory) -> Path:
    """The folder of one two-process torchrun job (CPU, gloo) of tests/ddp_worker.py's
    "all" mode: per-rank files in grads/ (one step: batches and weights), dropout/,
    accumulate/ (on the windows of test_loop_accumulation.fixed_windows, saved there
    first) and float16/. One job for the four: starting a torchrun job (three Python
    processes) costs more than each part. Mark a test that reads it with SHARES_DDP_JOB.

    Raises:
        AssertionError: with the end of the ranks' stderr, if the job fails.
    """
    from tests.training.accumulation import fixed_windows

    out = tmp_path_factory.mktemp("ddp_job")
    (out / "accumulate").mkdir()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # fixed_windows' trainer is float64
    try:
        x, y = fixed_windows(shakespeare(), out / "windows")
    finally:
        torch.set_default_dtype(previous)
    torch.save({"x": x, "y": y}, out / "accumulate" / "windows.pt")
    job = torchrun(
        ROOT / "tests" / "ddp_worker.py", out, shakespeare(), "all", retry_gloo_abort=True
    )
    assert job.returncode == 0, job.stderr[-3000:]
    return out


@pytest.fixture(autouse=True)
def default_stop_signals():
    """Ctrl-C, SIGTERM and SIGHUP as in a terminal, for each training test: a suite
    started in the background (``pytest &``, ``nohup``) inherits them ignored, and a run
    leaves an ignored signal ignored (training.distributed.StopRequest), so the tests
    that raise them would see nothing. Restored afterwards."""
    defaults = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGTERM: signal.SIG_DFL,
        signal.SIGHUP: signal.SIG_DFL,
    }
    before = {sig: signal.signal(sig, handler) for sig, handler in defaults.items()}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)
