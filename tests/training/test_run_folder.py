"""training/run_folder.py: what a run leaves in out_dir; overwrite, unfinished runs, the lock.

The run folder's advice on a resume with no checkpoint: one piece of advice that,
followed as written, starts the run (it used to say "drop train.resume", and the new
run then asked for train.overwrite=true).
"""

import re

import pytest

from data import CorpusError
from model.checkpoint import load_checkpoint
from tests.conftest import tiny_overrides
from training import ConfigError, load_config, train
from training.run_folder import RunFolder


def test_overwrite_replaces_the_whole_earlier_run(tmp_path, shakespeare_path):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 3})))
    out = tmp_path / "run"
    assert len(list(out.glob("events.out.tfevents*"))) == 1
    with pytest.raises(ConfigError, match="already holds a checkpoint"):
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    train(
        load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.overwrite": True}))
    )
    assert len(list(out.glob("events.out.tfevents*"))) == 1  # no mixing of two runs' curves
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 6


def test_folder_of_an_unfinished_run_is_not_reused(tmp_path, shakespeare_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("seed: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="files of an earlier run .*train.overwrite=true") as e:
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    # Each sentence of the advice begins with a capital letter.
    assert "(config.yaml). Choose another out_dir=..., or replace it" in str(e.value)


def test_a_start_that_fails_on_bad_input_leaves_nothing(tmp_path):
    nested = tmp_path / "runs" / "new" / "run"
    bad = [f"out_dir={nested}", "device=cpu", f"data.path={tmp_path / 'missing.txt'}"]
    with pytest.raises(CorpusError, match="no such file"):
        train(load_config(None, bad))
    assert not (tmp_path / "runs").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept", encoding="utf-8")
    folder = tmp_path / "corpus_folder"  # a folder is a corpus of its files: none here
    folder.mkdir()
    bad = [f"out_dir={mine}", "device=cpu", f"data.path={folder}"]
    with pytest.raises(CorpusError, match="holds no files"):
        train(load_config(None, bad))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]  # no .lock left


def test_two_runs_cannot_share_a_folder(tmp_path, shakespeare_path):
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "run"
    out.mkdir()
    with open(out / ".lock", "a", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running trainer would
        with pytest.raises(ConfigError, match="another training run is writing"):
            train(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    assert train(load_config(None, tiny_overrides(tmp_path, shakespeare_path))).iter_num == 6


def test_a_run_before_its_first_checkpoint_is_named_as_running(tmp_path):
    """A run still before its first checkpoint has written config.yaml and events: a
    second run into its folder hears that it is running, not "replace it with
    train.overwrite=true", with or without overwrite or resume."""
    fcntl = pytest.importorskip("fcntl")
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("{}\n", encoding="utf-8")
    (out / "events.out.tfevents.1").write_bytes(b"")
    with open(out / ".lock", "a", encoding="utf-8") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the running trainer does
        for given in ([], ["train.overwrite=true"], ["train.resume=true"]):
            with pytest.raises(ConfigError) as refused:
                start([f"out_dir={out}", *given])
            assert str(refused.value) == (
                f"another training run is writing to {out}; wait for it or "
                "choose another out_dir=..."
            )
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "config.yaml",
        "events.out.tfevents.1",
    ]
    # The other ranks of a data-parallel run do not take the lock: rank 0 holds it.
    assert RunFolder(out, resume=False, overwrite=True, lock=False).resume_path is None


def advice_overrides(message: str) -> list[str]:
    """The section.key=value settings a message tells the user to give."""
    return re.findall(r"\btrain\.\w+=\w+", message)


def start(given: list[str]) -> RunFolder:
    cfg = load_config(None, given)
    return RunFolder(cfg.out_dir, cfg.train.resume, cfg.train.overwrite)


LEFTOVERS = [[], ["config.yaml"], ["config.yaml", "events.out.tfevents.1"]]


@pytest.mark.parametrize("leftovers", LEFTOVERS)
def test_following_the_advice_of_a_resume_without_checkpoint_starts_the_run(tmp_path, leftovers):
    out = tmp_path / "run"
    if leftovers:  # a run that stopped before its first checkpoint
        out.mkdir()
        for name in leftovers:
            (out / name).write_text("x", encoding="utf-8")
    given = [f"out_dir={out}", "train.resume=true"]
    with pytest.raises(ConfigError) as refused:
        start(given)
    message = str(refused.value)
    assert f"no checkpoint at {out / 'ckpt.pt'}" in message
    advice = advice_overrides(message)
    assert "train.resume=false" in advice
    assert ("train.overwrite=true" in advice) == bool(leftovers)
    folder = start(given + advice)  # the command line as the user retypes it
    assert folder.resume_path is None
    folder.release()


def fail_at_step(trainer, step: int):
    """Make the trainer's ``step``-th optimizer step (0-based) raise, as an
    out-of-memory error or a console that cannot print would."""
    real = trainer.train_step

    def train_step(s):
        if s == step:
            raise RuntimeError("CUDA out of memory (planted)")
        return real(s)

    trainer.train_step = train_step


def test_a_new_run_that_fails_before_its_first_checkpoint_leaves_nothing(
    tmp_path, shakespeare_path, capsys
):
    """Its config.yaml and event files, with no checkpoint to resume from, used to make
    the same command refuse the folder ("already holds files of an earlier run")."""
    from training.loop import Trainer

    out = tmp_path / "runs" / "new"
    given = tiny_overrides(tmp_path, shakespeare_path, out_dir=out)
    trainer = Trainer(load_config(None, given))
    fail_at_step(trainer, 1)  # before the first evaluation, at step 3
    with pytest.raises(RuntimeError, match="planted"):
        trainer.run()  # closes the trainer on its way out
    assert not (tmp_path / "runs").exists()  # nor the folders it made
    assert "no checkpoint was written: removed config.yaml, events.out.tfevents" in (
        capsys.readouterr().out
    )
    assert train(load_config(None, given)).iter_num == 6  # the same command, as typed


def test_a_run_that_fails_after_a_checkpoint_keeps_everything(tmp_path, shakespeare_path):
    from training.loop import Trainer

    given = tiny_overrides(tmp_path, shakespeare_path)
    trainer = Trainer(load_config(None, given))
    fail_at_step(trainer, 4)  # after the checkpoint of step 3
    with pytest.raises(RuntimeError, match="planted"):
        trainer.run()  # closes the trainer on its way out
    out = tmp_path / "run"
    assert {"ckpt.pt", "best.pt", "config.yaml", ".lock"} <= {p.name for p in out.iterdir()}
    assert len(list(out.glob("events.out.tfevents*"))) == 1
    assert train(load_config(None, [*given, "train.resume=true"])).iter_num == 6


def test_an_out_dir_that_is_not_utf8_is_refused_before_anything_is_made(tmp_path):
    """A folder name with a Latin-1 byte (as ``out_dir=$'caf\\xe9'`` types it) reached
    TensorBoard's event writer, which encodes file names as UTF-8: a traceback once
    training had begun."""
    import os

    out = os.fsdecode(bytes(tmp_path) + b"/caf\xe9")  # 'caf\udce9', as sys.argv holds it
    with pytest.raises(ConfigError) as refused:
        train(load_config(None, [f"out_dir={out}", "device=cpu"]))
    assert str(refused.value) == (
        f"out_dir={tmp_path}/caf\\xe9 holds bytes that are not UTF-8, and TensorBoard's "
        "event files cannot be written under such a name: choose an out_dir spelt in UTF-8"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("below", ["", "sub"])
def test_an_out_dir_that_is_a_file_is_named_with_the_fix(tmp_path, below):
    """out_dir=notes.txt (or notes.txt/sub), a file: "cannot create or write
    notes.txt: File exists" (or "Not a directory") named no fix."""
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        train(load_config(None, [f"out_dir={notes / below}", "device=cpu"]))
    where = f"out_dir={notes}" if not below else f"out_dir={notes / below}: {notes}"
    assert str(refused.value) == (
        f"{where} is a file, not a folder. Choose another out_dir=..., or move the file away"
    )
    assert notes.read_text(encoding="utf-8") == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_failure_while_the_run_opens_closes_its_event_writer(
    tmp_path, shakespeare_path, monkeypatch
):
    """The event file was opened before the block that closes it: a failure while the
    run said its opening lines (a console that cannot print, before cli.console) left
    the writer's thread running and its file open."""
    import threading

    import training.report
    from training.loop import Trainer

    real_say = training.report.Reporter.say

    def say(self, line):
        if line.startswith("training on"):
            raise RuntimeError("cannot print (planted)")
        real_say(self, line)

    monkeypatch.setattr(training.report.Reporter, "say", say)
    before = set(threading.enumerate())
    trainer = Trainer(load_config(None, tiny_overrides(tmp_path, shakespeare_path)))
    with pytest.raises(RuntimeError, match="planted"):
        trainer.run()
    left = [t for t in set(threading.enumerate()) - before if "Writer" in type(t).__name__]
    assert left == []
    assert not (tmp_path / "run").exists()  # and a new run leaves nothing


def test_the_temporary_file_of_a_killed_save_is_removed_by_the_next_run(tmp_path, shakespeare_path):
    """A save cut short by SIGKILL leaves .ckpt.pt.tmp, as large as a checkpoint; the
    run that next takes the folder removes it (the one holding the lock alone may)."""
    given = tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 3})
    train(load_config(None, given))
    out = tmp_path / "run"
    for name in (".ckpt.pt.tmp", ".best.pt.tmp"):
        (out / name).write_bytes(b"half a checkpoint")
    # A resume with nothing to do: it takes the folder, and writes no checkpoint.
    assert train(load_config(None, [*given, "train.resume=true"])).iter_num == 3
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
