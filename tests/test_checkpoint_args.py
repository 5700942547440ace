"""cli/checkpoint_args.py: what sample.py, evaluate.py and explore_attention.py say about
a --checkpoint that is not there, judged from the run folder."""

import fcntl

import pytest

from cli.checkpoint_args import resolve_checkpoint_path
from model.checkpoint import CheckpointError, run_in_progress


def hint(out_dir, name="ckpt.pt") -> str:
    with pytest.raises(CheckpointError) as e:
        resolve_checkpoint_path(out_dir, name)
    return str(e.value)


def finished_run(folder):
    folder.mkdir()
    (folder / "config.yaml").write_text("train:\n  eval_interval: 550\n", encoding="utf-8")
    (folder / ".lock").write_text("", encoding="utf-8")
    for name in ("ckpt.pt", "best.pt"):
        (folder / name).write_bytes(b"")
    return folder


def test_a_mistyped_name_on_a_finished_run_names_the_files_it_holds(tmp_path):
    run = finished_run(tmp_path / "run")
    message = hint(run, "bset.pt")
    assert f"no checkpoint at {run / 'bset.pt'}: {run} holds best.pt, ckpt.pt" in message
    assert "did you mean --checkpoint best.pt?" in message
    assert "wait for it" not in message and "first evaluation" not in message
    assert "did you mean --checkpoint ckpt.pt?" in hint(run, "ckpt")
    assert "did you mean" not in hint(run, "final.pt")


def test_wait_only_while_the_run_holds_its_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  eval_interval: 550\n", encoding="utf-8")
    (run / ".lock").write_text("", encoding="utf-8")
    assert run_in_progress(run) is False
    stopped = hint(run)
    assert "stopped before its first evaluation (step 550) and wrote no checkpoint" in stopped
    assert "train.overwrite=true" in stopped and "wait for it" not in stopped
    with open(run / ".lock", "a", encoding="utf-8") as lock:  # as a training run holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert run_in_progress(run) is True
        running = hint(run)
    assert "is still training and has not reached its first evaluation (step 550)" in running
    assert "wait for it" in running
    assert run_in_progress(run) is False  # the probe gave its shared lock back


def test_a_folder_without_a_lock_file_gets_both_readings(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  eval_interval: 550\n", encoding="utf-8")
    assert run_in_progress(run) is None
    message = hint(run)
    assert "if it is still training" in message and "if it stopped before" in message


def test_the_readme_describes_the_checkpoint_flags_as_help_does():
    """The README's flag table and --help give --out-dir and --checkpoint the same
    words (they used to disagree on what a name without a folder means)."""
    from cli.checkpoint_args import CHECKPOINT_HELP, OUT_DIR_HELP
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `--out-dir`"))
    meaning = row.split(" | ")[-1].rstrip(" |").replace("`", "")
    assert meaning == f"--out-dir: {OUT_DIR_HELP}; --checkpoint: {CHECKPOINT_HELP}"
    import sample

    help_text = " ".join(sample.build_parser().format_help().split())
    assert " ".join(CHECKPOINT_HELP.split()) in help_text
