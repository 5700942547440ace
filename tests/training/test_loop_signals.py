"""Ctrl-C and SIGTERM save at the step's end; the run resumes exactly
(training/distributed.py's StopRequest)."""

import signal

import pytest

from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from tests.training.conftest import SHARES_STRAIGHT_RUN, STRAIGHT, SignalAt
from training import load_config, train
from training.loop import Trainer


@pytest.mark.slow
@SHARES_STRAIGHT_RUN
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_resumes_exactly(straight_run, tmp_path, shakespeare_path, sig, capsys):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **STRAIGHT))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=4, sig=sig)
    first = trainer.run()
    assert first.interrupted and first.iter_num == 4  # the step in progress completes
    command = f"python train.py --config {tmp_path / 'run' / 'config.yaml'} train.resume=true"
    assert f"Resume with:\n  {command}\n" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 4
    resumed_cfg = tiny_overrides(tmp_path, shakespeare_path, **STRAIGHT, **{"train.resume": True})
    second = train(load_config(None, resumed_cfg))
    assert {**first.losses, **second.losses} == straight_run.losses  # bitwise equal


def test_second_ctrl_c_during_the_save_does_not_lose_it(tmp_path, shakespeare_path, monkeypatch):
    import training.loop

    real_save = training.loop.save_checkpoint

    def save_while_interrupted(payload, path):
        signal.raise_signal(signal.SIGINT)  # the impatient second Ctrl-C
        real_save(payload, path)

    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 10}))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=2, sig=signal.SIGINT)
    monkeypatch.setattr(training.loop, "save_checkpoint", save_while_interrupted)
    result = trainer.run()
    assert result.interrupted and result.iter_num == 2
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 2


@pytest.mark.slow  # a torchrun job
def test_sigterm_under_torchrun_saves_whatever_the_log_interval(tmp_path, shakespeare_path):
    """Two gloo ranks with train.log_interval=100000: SIGTERM to torchrun (as `kill`, a
    scheduler or `docker stop` sends it) is agreed on at the next step and saved. The
    ranks used to agree at multiples of log_interval only, so they never did, and
    torchrun killed them 30 s later with no checkpoint (issue 33, item 5)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT, TIMEOUT_S

    extra = {
        "device": "cpu",
        "train.max_iters": 1_000_000,
        "train.log_interval": 100_000,
        "train.eval_interval": 5,
        "train.eval_tokens": 2048,
        "train.sample_tokens": 0,
        "train.attention_prompt": "''",
    }
    overrides = tiny_overrides(tmp_path, shakespeare_path, **extra)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    proc = subprocess.Popen(
        [*cmd, "train.py", *overrides],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
    )
    try:
        lines = []
        for line in proc.stdout:  # training is under way once the first evaluation is
            lines.append(line)
            if line.startswith("step 5: train"):
                break
        assert lines and lines[-1].startswith("step 5: train"), "".join(lines)[-3000:]
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    out = "".join(lines) + rest
    assert "interrupted at step" in out, out[-3000:]
    stopped_at = int(out.split("interrupted at step ")[1].split(";")[0])
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert ckpt["iter_num"] == stopped_at >= 5 and ckpt["rng"]["world_size"] == 2


def test_a_signal_during_an_evaluation_saves_once(tmp_path, shakespeare_path, monkeypatch):
    """SIGTERM while step 3 is evaluated: the evaluation's checkpoint is the stopped
    run's; it is not written a second time before the run stops."""
    import training.loop

    written = []
    real_save = training.loop.save_checkpoint

    def counting_save(payload, path):
        written.append((path.name, payload["iter_num"]))
        real_save(payload, path)

    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 10}))
    trainer = Trainer(cfg)
    real_evaluate = trainer.evaluator.evaluate

    def evaluate_interrupted(*args):
        signal.raise_signal(signal.SIGTERM)
        return real_evaluate(*args)

    trainer.evaluator.evaluate = evaluate_interrupted
    monkeypatch.setattr(training.loop, "save_checkpoint", counting_save)
    result = trainer.run()
    assert result.interrupted and result.signal == signal.SIGTERM and result.iter_num == 3
    assert [w for w in written if w[0] == "ckpt.pt"] == [("ckpt.pt", 3)]


# A train.py whose setup receives SIGTERM where ``where`` is called (a function of
# training.loop), as `kill`, `docker stop` or a scheduler would send it.
SIGTERM_DURING = """
import signal, sys
sys.path[:0] = [{root!r}, {tests!r}]
import training.loop as loop
real = getattr(loop, {where!r})
def interrupted(*args, **kwargs):
    signal.raise_signal(signal.SIGTERM)
    return real(*args, **kwargs)
setattr(loop, {where!r}, interrupted)
import train
from cli.console import run_command
sys.exit(run_command(train.main, sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "where",
    # Building the optimizer (before the run folder is written to), and saying the
    # run's opening lines (after config.yaml is written, before the first step).
    ["build_optimizer", "tensorboard_line"],
)
def test_sigterm_before_training_begins_leaves_nothing(tmp_path, shakespeare_path, where):
    """SIGTERM's default action ended the process at once: the lock file and folders,
    or config.yaml, stayed, and the same command then refused the folder."""
    import subprocess
    import sys

    from tests.conftest import ROOT, TIMEOUT_S

    script = SIGTERM_DURING.format(root=str(ROOT), tests=str(ROOT / "tests"), where=where)
    given = tiny_overrides(tmp_path, shakespeare_path, out_dir=tmp_path / "runs" / "new")
    r = subprocess.run(
        [sys.executable, "-c", script, *given],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 128 + signal.SIGTERM, r.stderr[-2000:]
    assert "SIGTERM: stopping; a new run leaves nothing behind" in r.stderr
    assert not (tmp_path / "runs").exists()
    assert train(load_config(None, given)).iter_num == 6  # the same command starts


def test_a_signal_during_the_first_step_stops_at_once_and_leaves_nothing(
    tmp_path, shakespeare_path
):
    """The first step compiles (with train.compile: minutes), and `docker stop` waits
    10 s before SIGKILL: a signal then used to wait for the step to end. Nothing is
    trained yet, so the run stops at once, and a new run leaves its folder empty."""
    from common.signals import Terminated

    out = tmp_path / "runs" / "new"
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, out_dir=out))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=1, sig=signal.SIGTERM)
    with pytest.raises(Terminated) as stopped:
        trainer.run()
    assert stopped.value.code == 128 + signal.SIGTERM
    assert not (tmp_path / "runs").exists()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handlers are put back


def test_a_closed_terminal_saves_like_sigterm(tmp_path, shakespeare_path):
    """SIGHUP (the terminal of an ssh session closes) ended the run with no save."""
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 10}))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=3, sig=signal.SIGHUP)
    result = trainer.run()
    assert result.interrupted and result.signal == signal.SIGHUP and result.iter_num == 3
    assert load_checkpoint(tmp_path / "run" / "ckpt.pt")["iter_num"] == 3


def test_a_signal_ignored_by_nohup_stays_ignored(tmp_path, shakespeare_path):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path))
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts the run
    try:
        trainer = Trainer(cfg)
        trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=3, sig=signal.SIGHUP)
        result = trainer.run()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
    assert not result.interrupted and result.iter_num == 6


def test_ctrl_c_before_training_begins_ends_train_py_without_a_traceback(
    tmp_path, shakespeare_path, monkeypatch, capsys
):
    import train as train_py
    import training.loop

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the model is built

    monkeypatch.setattr(training.loop, "build_optimizer", interrupted)
    out = tmp_path / "runs" / "new"
    code = train_py.main(tiny_overrides(tmp_path, shakespeare_path, out_dir=out))
    assert code == 130
    assert capsys.readouterr().err.endswith("stopped by Ctrl-C without saving\n")
    assert not (tmp_path / "runs").exists()
