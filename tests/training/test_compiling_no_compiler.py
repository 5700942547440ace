"""torch.compile where no compiler is installed (a slim container, a fresh laptop): the
run trains eager and says so in one line before its first step, instead of a long
traceback from Inductor in the first step; sample.py's default decode step stays eager.

The compiler is hidden as a user's machine would lack it: PATH names an empty folder
and CXX and CC are unset."""

import os
import subprocess
import sys

import pytest
import torch

from model import GPT, GPTConfig
from model.compiler import missing_compiler
from model.engine import Engine, compile_by_default
from tests.conftest import ROOT, TIMEOUT_S, shakespeare, tiny_overrides
from training.loop import resolve_compile
from training.settings import TrainConfig

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.fixture
def no_compiler(tmp_path, monkeypatch):
    """PATH with nothing on it, CXX and CC unset."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv("CC", raising=False)
    return empty


def fake_compiler(folder, name):
    """An executable file called ``name`` in ``folder``: found on PATH."""
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_no_compiler_is_named_with_the_variable_to_set(no_compiler):
    assert missing_compiler(CPU) == "no C++ compiler (g++, or one named by CXX) on PATH"
    assert missing_compiler(CUDA) == "no C compiler (gcc or clang, or one named by CC) on PATH"


def test_a_compiler_on_path_or_named_by_the_variable_is_found(no_compiler, monkeypatch):
    fake_compiler(no_compiler, "g++")
    fake_compiler(no_compiler, "clang")
    assert missing_compiler(CPU) is None
    assert missing_compiler(CUDA) is None
    elsewhere = no_compiler.parent / "tools"
    elsewhere.mkdir()
    monkeypatch.setenv("CXX", str(fake_compiler(elsewhere, "my-c++")))
    assert missing_compiler(CPU) is None


def test_a_variable_naming_nothing_is_said(no_compiler, monkeypatch):
    fake_compiler(no_compiler, "g++")  # torch tries only CXX when it is set
    monkeypatch.setenv("CXX", "clang++-99")
    assert missing_compiler(CPU) == "CXX=clang++-99 is not an executable compiler"


def test_train_compile_falls_back_to_eager_with_one_line(no_compiler):
    tc = TrainConfig(compile=True)
    note = resolve_compile(tc, CPU)
    assert tc.compile is False
    assert note.startswith("train.compile: no C++ compiler (g++, or one named by CXX) on PATH")
    assert "apt install g++" in note and "train.compile=false" in note
    fake_compiler(no_compiler, "g++")
    tc = TrainConfig(compile=True)
    assert resolve_compile(tc, CPU) == "" and tc.compile is True
    tc = TrainConfig(compile=False)
    assert resolve_compile(tc, CPU) == "" and tc.compile is False


def test_the_decode_step_is_eager_by_default_without_a_compiler(no_compiler):
    assert compile_by_default(CUDA) is False
    fake_compiler(no_compiler, "gcc")
    assert compile_by_default(CUDA) is True
    assert compile_by_default(CPU) is False  # eager on CPU either way
    model = GPT(GPTConfig(vocab_size=8, block_size=8, n_layer=1, n_head=1, n_embd=8))
    assert Engine(model).compiled is False


@pytest.mark.slow  # a process that imports torch and trains: ~10 s on 2 shared cores
def test_the_cpu_recipe_trains_without_a_compiler(tmp_path):
    """The Quick start's command, tiny, on a machine without g++: it trains (eager)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CXX", "CC")}
    env["PATH"] = str(empty)
    overrides = tiny_overrides(
        tmp_path,
        shakespeare(),
        **{
            "device": "cpu",
            "data.val_fraction": 0.01,
            "train.compile": True,
            "train.max_iters": 2,
            "train.eval_interval": 2,
            "train.sample_tokens": 0,
            "train.attention_prompt": "",
        },
    )
    cmd = [sys.executable, "train.py", "--config", "configs/shakespeare_char_cpu.yaml"]
    r = subprocess.run(
        cmd + overrides,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT_S,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = r.stdout.splitlines()
    said = [line for line in lines if line.startswith("train.compile: no C++ compiler")]
    assert len(said) == 1, r.stdout
    assert lines.index(said[0]) < next(i for i, x in enumerate(lines) if x.startswith("step 2"))
    assert not any(line.startswith("compiling the model") for line in lines)
    assert (tmp_path / "run" / "ckpt.pt").is_file()
