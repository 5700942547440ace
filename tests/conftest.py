"""Shared fixtures: the real corpora, tiny run configs, and the device the
device-dependent tests run on.

    python -m pytest -q                              # everything on CPU
    MINIGPT_TEST_DEVICE=cuda python -m pytest -q     # device-dependent tests on CUDA

MINIGPT_TEST_DEVICE (cpu, the default, or cuda) is read once, here. Training end to
end, resume, KV-cache and sampling parity, the attention paths and the one-process
torchrun job use TEST_DEVICE; tests about CPU behaviour (the two-rank gloo jobs, "a cpu
run never queries CUDA", sample.py's command line) stay on CPU. Parity tests compare in
float32 on either device (no autocast; PyTorch leaves TF32 off for float32 matrix
products unless asked), so their tolerances mean the same on both.

torch.compile's on-disk caches (Inductor's FX graphs, AOTAutograd's, Triton's kernels)
go to a directory of this test session's, removed at its end, unless
TORCHINDUCTOR_CACHE_DIR is set: the tests neither reuse nor add to the caches of the
user's own runs (in /tmp/torchinductor_<user> by default), so each session compiles
as a clean checkout's CI does. The suite runs in pytest-xdist workers (pyproject.toml's
addopts: -n auto; -n 0 for one process): they inherit the directory from the process
that starts them, so they share it, and that process removes it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from model.compiler import missing_compiler

ROOT = Path(__file__).resolve().parent.parent
KOREAN = ROOT / "data" / "korean_sample" / "input.txt"  # ships with the code

TEST_DEVICE_VARIABLE = "MINIGPT_TEST_DEVICE"
TEST_DEVICES = ("cpu", "cuda")
TEST_DEVICE_NAME = os.environ.get(TEST_DEVICE_VARIABLE, "").strip().lower() or "cpu"
# A bad name stays "cpu" here so that importing this module never fails (tests/ddp_worker.py
# imports it); pytest_configure reports it before any test runs.
TEST_DEVICE = torch.device(TEST_DEVICE_NAME if TEST_DEVICE_NAME in TEST_DEVICES else "cpu")
ON_CUDA = TEST_DEVICE.type == "cuda"


# Tests that build torch.compile's kernels with Inductor need the compiler it calls (g++
# on CPU); where there is none, a run falls back to eager (model.compiler) and they skip.
NEEDS_COMPILER = pytest.mark.skipif(
    missing_compiler(TEST_DEVICE) is not None,
    reason=f"torch.compile's compiler: {missing_compiler(TEST_DEVICE)}",
)

# Tests that build kernels with Inductor run in one pytest-xdist worker, one after the
# other: the first pays for starting Inductor (its imports, compile workers, precompiled
# header) and the others reuse it and the kernels they share (docs/benchmarks.md#the-test-suite).
INDUCTOR = pytest.mark.xdist_group("inductor")


# One pytest-xdist worker per core (addopts: -n auto) each running torch's default of one
# thread per core oversubscribes the cores: OpenMP's threads spin while they wait and the
# suite takes two to three times as long (docs/benchmarks.md#the-test-suite). Each worker
# takes its share of the cores, and so do the processes it starts (OMP_NUM_THREADS), unless
# the person running the tests chose OMP_NUM_THREADS.
WORKER_COUNT = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKER_COUNT > 1 and "OMP_NUM_THREADS" not in os.environ:
    WORKER_THREADS = max(1, (os.cpu_count() or 1) // WORKER_COUNT)
    os.environ["OMP_NUM_THREADS"] = str(WORKER_THREADS)
    torch.set_num_threads(WORKER_THREADS)

# Set at import, before any test compiles; inherited by the processes tests start.
COMPILE_CACHE = None
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    COMPILE_CACHE = tempfile.mkdtemp(prefix="minigpt-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = COMPILE_CACHE


def pytest_unconfigure(config):
    """Remove this session's compile cache (see the module docstring)."""
    if COMPILE_CACHE is not None:
        shutil.rmtree(COMPILE_CACHE, ignore_errors=True)


def pytest_configure(config):
    """Stop before any test if MINIGPT_TEST_DEVICE names a device that cannot be used."""
    if TEST_DEVICE_NAME not in TEST_DEVICES:
        raise pytest.UsageError(
            f"{TEST_DEVICE_VARIABLE}={TEST_DEVICE_NAME!r}: use one of {', '.join(TEST_DEVICES)} "
            "(or leave it unset for cpu)"
        )
    if ON_CUDA and not torch.cuda.is_available():
        raise pytest.UsageError(
            f"{TEST_DEVICE_VARIABLE}=cuda but CUDA is not available here; unset it to test on CPU"
        )


def pytest_report_header(config):
    """Say which device the device-dependent tests use, at the top of the report."""
    return f"test device: {TEST_DEVICE} ({TEST_DEVICE_VARIABLE})"


def shakespeare() -> Path:
    """Tiny Shakespeare, the repository's copy (data/tinyshakespeare/input.txt), its
    sha256 checked as a run checks it."""
    from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus

    path = ROOT / DEFAULT_CORPUS_PATH
    ensure_default_corpus(path)
    return path


def made_korean_text(n_chars: int = 120_000, seed: int = 0) -> str:
    """Korean-looking text (words of random Hangul syllables, lines, punctuation) with
    over 1,500 distinct characters, including every syllable of "새가 하늘을 날았다"."""
    import random

    rng = random.Random(seed)
    syllables = [chr(c) for c in range(0xAC00, 0xD7A4, 7)]  # 1,596 of the 11,172
    words = ["새가", "하늘을", "날았다", "바다", "사람"]
    out = []
    while sum(map(len, out)) < n_chars:
        word = rng.choice(words) if rng.random() < 0.2 else ""
        word = word or "".join(rng.choices(syllables, k=rng.randint(1, 4)))
        out.append(word + rng.choice([" ", " ", " ", ". ", "\n"]))
    return "".join(out)[:n_chars]


@pytest.fixture
def shakespeare_path() -> Path:
    return shakespeare()


@pytest.fixture(scope="session")
def korean_path() -> Path:
    """The Korean sample that ships with the code (data/korean_sample/input.txt: 39,289
    characters, 1,011 distinct), the same on every machine."""
    return KOREAN


def tiny_overrides(tmp_path: Path, corpus: Path, **extra) -> list[str]:
    """Overrides for a run small enough to take a second or two, on TEST_DEVICE unless
    ``device=...`` is given."""
    values = {
        "out_dir": tmp_path / "run",
        "device": TEST_DEVICE.type,
        "data.path": corpus,
        "data.cache_dir": tmp_path / "cache",
        "model.n_layer": 2,
        "model.n_head": 2,
        "model.n_embd": 32,
        "model.block_size": 32,
        "train.batch_size": 8,
        "train.max_iters": 6,
        "train.eval_interval": 3,
        "train.log_interval": 1,
        "train.warmup_iters": 2,
        "train.eval_train_tokens": 2048,
        "train.eval_batch_size": 512,
        # The TensorBoard sample stays on but small (one forward pass per character). The
        # heatmaps are off: drawing them (and importing matplotlib) took half of a tiny
        # run's time; tests of the views pass train.attention_prompt themselves.
        "train.sample_tokens": 16,
        "train.attention_prompt": "",
    }
    values.update(extra)
    return [f"{k}={v}" for k, v in values.items()]


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar a run logged: {tag: [(step, value), ...]}, read from its events."""
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


TIMEOUT_S = 180  # for each launched process: a hung collective must fail, not stall CI


# What a rank prints when a C++ thread of the gloo backend is destroyed while still
# running. Seen on 30 November 2026 with the 2 cores shared with other work: rank 1
# of the accumulation run in a suite run, and 2 of 9 runs of the torchrun tests; not
# on a quiet machine.
GLOO_THREAD_ABORT = "terminate called without an active exception"


def torchrun(
    *args,
    cwd=ROOT,
    nproc: int = 2,
    retry_gloo_abort: bool = False,
    run_folder: Path | None = None,
) -> subprocess.CompletedProcess:
    """Run a script under torchrun with ``nproc`` processes, one CPU thread each.

    retry_gloo_abort: run once more if a rank died with GLOO_THREAD_ABORT, a fault of
    the backend rather than of the code under test. Only for runs that write all their
    outputs afresh, or that name the ``run_folder`` they write.
    run_folder: the out_dir of a training run: copied before the first try and put back
    as it was before a retry, so the retry starts from the same files (a fresh run from
    none, a resumed run from the same checkpoint).
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd.append(f"--nproc_per_node={nproc}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    before = None
    if retry_gloo_abort and run_folder is not None:
        before = run_folder.with_name(run_folder.name + ".before-torchrun")
        shutil.rmtree(before, ignore_errors=True)
        if run_folder.exists():
            shutil.copytree(run_folder, before)
    try:
        for attempt in range(2 if retry_gloo_abort else 1):
            if attempt and run_folder is not None:
                shutil.rmtree(run_folder, ignore_errors=True)
                if before.exists():
                    shutil.copytree(before, run_folder)
            result = subprocess.run(
                cmd + [str(a) for a in args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=TIMEOUT_S,
            )
            if result.returncode == 0 or GLOO_THREAD_ABORT not in result.stderr:
                break
    finally:
        if before is not None:
            shutil.rmtree(before, ignore_errors=True)
    return result


def sharp_model(
    vocab_size: int = 20,
    block_size: int = 16,
    seed: int = 0,
    std: float = 0.3,
    device="cpu",
    **architecture,
):
    """A small GPT (2 layers, 2 heads, 32 wide unless ``architecture`` says otherwise,
    eval mode, on ``device``) with weights far larger than GPT-2's initial ones:
    attention is then peaked and logits spread over several units, so a wrong key,
    value or position moves the logits well beyond a 1e-4 tolerance."""
    from model import GPT, GPTConfig

    torch.manual_seed(seed)
    shape = {"n_layer": 2, "n_head": 2, "n_embd": 32, **architecture}
    config = GPTConfig(vocab_size, block_size, **shape)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model.to(device)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Keep each module's tests that share a module-scoped fixture (a trained run, a
    browser) in one pytest-xdist worker, so the fixture is built once, not once per
    worker. pyproject.toml's addopts run the suite with --dist loadgroup, which sends
    grouped tests together and spreads the rest one by one."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group"):  # grouped already
            continue
        shared = any(
            definition.scope == "module"
            for definitions in info.name2fixturedefs.values()
            for definition in definitions
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
