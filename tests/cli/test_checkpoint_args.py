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


def suggested_command(message: str) -> list[str]:
    """The arguments of the train.py command a hint suggests (up to the end of the
    command: a comma, or the end of the message)."""
    import shlex

    command = message[message.index("python train.py ") :].split(", with ")[0]
    return shlex.split(command)[2:]


def config_and_overrides(args: list[str]) -> tuple[str | None, list[str]]:
    config = args[args.index("--config") + 1] if "--config" in args else None
    return config, [a for a in args if "=" in a]


def test_a_stopped_run_is_told_to_train_its_own_config_again(tmp_path, monkeypatch):
    """The hint repeats the run's own config (its config.yaml): following it trains the
    same model on the same corpus into the same folder, not the default recipe's
    (issue 33, items 15 and 19)."""
    import yaml

    from training.config import load_config

    monkeypatch.chdir(tmp_path)
    korean = tmp_path / "korean.txt"
    given = load_config(
        None,
        [
            "out_dir=runs/korean",
            f"data.path={korean}",
            "model.n_layer=3",
            "train.eval_interval=550",
            "train.resume=true",  # a resumed run's config.yaml: the new run is not one
        ],
    )
    run = tmp_path / "runs" / "korean"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(given.to_dict()), encoding="utf-8")
    message = hint("runs/korean")
    assert "stopped before its first evaluation (step 550)" in message
    args = suggested_command(message)
    assert args[:2] == ["--config", "runs/korean/config.yaml"]
    config, overrides = config_and_overrides(args)
    again = load_config(config, overrides)
    assert again.data.path == str(korean) and again.model == given.model
    assert again.out_dir == "runs/korean"
    assert again.train.overwrite is True and again.train.resume is False


def test_a_folder_with_no_run_names_its_recipe_or_what_to_supply(tmp_path, monkeypatch):
    """Before any training, a folder a shipped recipe writes (runs/<recipe>) gets that
    recipe; another gets placeholders and says what goes there, rather than the CPU
    recipe without the user's corpus."""
    monkeypatch.chdir(tmp_path)
    from training.config import SHIPPED_CONFIGS

    gpt2 = hint("runs/shakespeare_char_cpu_gpt2")
    assert "there is no run folder runs/shakespeare_char_cpu_gpt2" in gpt2
    config, overrides = config_and_overrides(suggested_command(gpt2))
    assert config == str(SHIPPED_CONFIGS / "shakespeare_char_cpu_gpt2.yaml")
    assert overrides == []  # the recipe writes there itself
    korean = hint("runs/korean")
    assert "python train.py --config RECIPE data.path=TEXT out_dir=runs/korean, with RECIPE" in (
        korean
    )
    assert "configs/shakespeare_char_cpu.yaml out_dir" not in korean


def test_the_sampling_page_describes_the_checkpoint_flags_as_help_does():
    """docs/sampling.md's flag table and --help give --out-dir and --checkpoint the same
    words (they used to disagree on what a name without a folder means)."""
    from cli.checkpoint_args import CHECKPOINT_HELP, OUT_DIR_HELP
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "sampling.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `--out-dir`"))
    meaning = row.split(" | ")[-1].rstrip(" |").replace("`", "")
    assert meaning == f"--out-dir: {OUT_DIR_HELP}; --checkpoint: {CHECKPOINT_HELP}"
    import sample

    help_text = " ".join(sample.build_parser().format_help().split())
    assert " ".join(CHECKPOINT_HELP.split()) in help_text
