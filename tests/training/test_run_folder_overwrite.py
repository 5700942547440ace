"""train.overwrite keeps the earlier run recoverable until the new run is safe.

The earlier run's ckpt.pt and best.pt were deleted when the new run began: a new run
that then crashed in its first step, ran out of memory or was killed left neither run.
Now the earlier files wait in out_dir/.replaced-run/ until the new run's first
checkpoint, and come back if it ends without one (or, after a kill, at the next start
in the folder).
"""

import pytest

from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import load_config, train
from training.loop import Trainer
from training.run_folder import REPLACED_NAME, RunFolder, run_files

QUIET = {"train.sample_tokens": 0, "train.attention_prompt": "", "train.final_full_eval": False}


def _earlier_run(tmp_path, corpus) -> tuple[list[str], dict[str, bytes]]:
    given = tiny_overrides(tmp_path, corpus, **QUIET, **{"train.max_iters": 3})
    train(load_config(None, given))
    files = {p.name: p.read_bytes() for p in run_files(tmp_path / "run")}
    assert {"ckpt.pt", "best.pt", "config.yaml"} <= set(files)
    return given, files


def _as_it_was(out, files: dict[str, bytes]) -> None:
    assert {p.name: p.read_bytes() for p in run_files(out)} == files
    assert not (out / REPLACED_NAME).exists()


def test_a_replacing_run_that_fails_before_its_checkpoint_puts_the_earlier_back(
    tmp_path, shakespeare_path, capsys
):
    given, files = _earlier_run(tmp_path, shakespeare_path)
    trainer = Trainer(load_config(None, [*given, "train.overwrite=true", "model.n_embd=48"]))

    def crash(step):  # the first step fails, as an out-of-memory error would
        assert not (tmp_path / "run" / "ckpt.pt").exists()  # moved aside by now
        raise RuntimeError("out of memory (planted)")

    trainer.train_step = crash
    with pytest.raises(RuntimeError, match="planted"):
        trainer.run()
    _as_it_was(tmp_path / "run", files)
    out = capsys.readouterr().out
    aside = tmp_path / "run" / REPLACED_NAME
    assert "train.overwrite: the earlier run (best.pt, ckpt.pt, config.yaml, events." in out
    assert f"waits in {aside} until this run writes its first checkpoint" in out
    assert f"the earlier run in {tmp_path / 'run'} is back in place (best.pt, ckpt.pt" in out
    resumed = train(load_config(None, [*given, "train.resume=true", "train.max_iters=4"]))
    assert resumed.iter_num == 4


def test_a_replacing_run_deletes_the_earlier_once_it_has_a_checkpoint(tmp_path, shakespeare_path):
    given, _ = _earlier_run(tmp_path, shakespeare_path)
    out = tmp_path / "run"
    trainer = Trainer(load_config(None, [*given, "train.overwrite=true", "train.max_iters=6"]))
    real_step, seen = trainer.train_step, []

    def step(n):  # what the folder holds before steps 1 (no checkpoint) and 4 (one)
        seen.append((out / REPLACED_NAME).is_dir())
        return real_step(n)

    trainer.train_step = step
    trainer.run()
    trainer.close()
    assert seen == [True, True, True, False, False, False]  # the checkpoint of step 3
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 6
    assert len(list(out.glob("events.out.tfevents*"))) == 1


def test_a_killed_replacing_run_leaves_the_earlier_one_to_resume(
    tmp_path, shakespeare_path, capsys
):
    """kill -9 before the new run's first checkpoint: nothing runs to put the files
    back, so the next run in the folder does, before it checks the folder."""
    given, _ = _earlier_run(tmp_path, shakespeare_path)
    out = tmp_path / "run"
    killed = RunFolder(out, resume=False, overwrite=True)
    killed.start({"seed": 7})  # the earlier run's files move aside; a new config.yaml
    (out / "events.out.tfevents.1.killed").write_bytes(b"half an event file")
    killed._lock.close()  # the process is gone: only its lock goes with it
    assert (out / REPLACED_NAME / "ckpt.pt").is_file()
    capsys.readouterr()
    resumed = train(load_config(None, [*given, "train.resume=true", "train.max_iters=4"]))
    assert resumed.iter_num == 4  # the earlier run, continued
    assert "ended before its first checkpoint: put the earlier run back (best.pt, ckpt.pt" in (
        capsys.readouterr().out
    )
    assert not (out / REPLACED_NAME).exists()
    assert not (out / "events.out.tfevents.1.killed").exists()


def test_a_killed_replacing_run_that_had_saved_keeps_only_its_own(tmp_path, shakespeare_path):
    given, _ = _earlier_run(tmp_path, shakespeare_path)
    out = tmp_path / "run"
    (out / REPLACED_NAME).mkdir()  # killed between its first checkpoint and the clean-up
    (out / REPLACED_NAME / "ckpt.pt").write_bytes(b"the replaced run's")
    ckpt = (out / "ckpt.pt").read_bytes()
    resumed = train(load_config(None, [*given, "train.resume=true", "train.max_iters=4"]))
    assert resumed.iter_num == 4
    assert not (out / REPLACED_NAME).exists() and ckpt != (out / "ckpt.pt").read_bytes()
