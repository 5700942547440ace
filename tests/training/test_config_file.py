"""A --config file that is not there: the error lists the configs that do exist
(configs/*.yaml) and the closest name."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from training.config import ConfigError, load_config


def test_a_missing_config_lists_the_configs_that_exist(monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(ConfigError) as e:
        load_config("configs/shakspeare_char_cpu.yaml")
    message = str(e.value)
    assert message.startswith("cannot read config file configs/shakspeare_char_cpu.yaml: ")
    assert "(did you mean configs/shakespeare_char_cpu.yaml?)" in message
    shipped = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert len(shipped) >= 4
    assert message.endswith(
        "; the configs that exist: " + ", ".join(f"configs/{name}" for name in shipped)
    )
    with pytest.raises(ConfigError) as e:
        load_config("nothing_like_it.yml")
    assert "did you mean" not in str(e.value) and "configs/shakespeare_char.yaml" in str(e.value)


def test_train_py_says_it_in_one_line(tmp_path):
    """From another folder the configs are shown by their full paths."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--config", "shakespeare_char_cpu.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"(did you mean {ROOT / 'configs' / 'shakespeare_char_cpu.yaml'}?)" in r.stderr
