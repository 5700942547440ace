"""Whether torch.compile can build its kernels here: the compiler it calls.

torch.compile's default backend, Inductor, writes C++ for CPU kernels and builds them
with the compiler named by the ``CXX`` environment variable, else ``g++`` (on macOS,
``clang++``); on CUDA its kernels are Triton's, whose launcher is built with ``CC``,
else ``gcc`` or ``clang``. Where none is installed (a slim container, a fresh laptop)
the first compiled call fails deep inside torch, so callers look here first and run
eager instead (`missing_compiler`).

    from model.compiler import missing_compiler
    missing = missing_compiler(torch.device("cpu"))   # None, or what is missing
"""

import os
import shutil
import sys

import torch


def compilers_looked_for(device: torch.device) -> tuple[str, ...]:
    """The compilers torch.compile would call on ``device``, in the order it tries them:
    ``$CXX`` (else g++, or clang++ on macOS) for CPU kernels; ``$CC`` (else gcc, clang)
    for Triton's on CUDA. A variable that is set is the only one tried, as torch does."""
    if device.type == "cuda":
        named = os.environ.get("CC")
        return (named,) if named else ("gcc", "clang")
    named = os.environ.get("CXX")
    return (named,) if named else ("clang++" if sys.platform == "darwin" else "g++",)


def missing_compiler(device: torch.device) -> str | None:
    """None if a compiler torch.compile needs on ``device`` is on PATH (or named by a
    path); else what is missing, for a message: e.g. "no C++ compiler (g++, or one
    named by CXX) on PATH". Only PATH is searched: nothing is run, so this is cheap.
    Windows (MSVC's cl, found by torch its own way) and MPS are not checked: None."""
    if sys.platform == "win32" or device.type not in ("cpu", "cuda"):
        return None
    names = compilers_looked_for(device)
    if any(shutil.which(name) for name in names):
        return None
    language, variable = ("C", "CC") if device.type == "cuda" else ("C++", "CXX")
    if os.environ.get(variable):
        return f"{variable}={names[0]} is not an executable compiler"
    return f"no {language} compiler ({' or '.join(names)}, or one named by {variable}) on PATH"
