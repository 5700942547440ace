"""The run folder's advice on a resume with no checkpoint: one piece of advice that,
followed as written, starts the run (it used to say "drop train.resume", and the new
run then asked for train.overwrite=true)."""

import re

import pytest

from training.config import ConfigError, load_config
from training.run_folder import RunFolder


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
