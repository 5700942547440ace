"""Choosing the device a model runs on, by name (the `device` setting and --device),
and the precision its forward passes compute in there (the `train.dtype` setting and
--dtype), with the autocast context that gives it.

    auto      bfloat16 on a CUDA GPU with bfloat16 arithmetic; float16 on an older CUDA
              GPU (a T4, a V100: training adds loss scaling, see training/precision.py);
              float32 on CPU and MPS
    float32   no autocast at all
    bfloat16  torch.autocast in bfloat16: matrix products in bfloat16, the rest float32
    float16   torch.autocast in float16

Autocast leaves the weights in float32; it runs the matrix products (linear layers,
attention) in the lower precision and keeps reductions such as softmax and the loss in
float32 (PyTorch's autocast op lists).
"""

import contextlib
import functools

import torch

DEVICE_NAMES = ("auto", "cpu", "cuda", "mps")
DTYPE_NAMES = ("auto", "float32", "bfloat16", "float16")


class DeviceError(ValueError):
    """A device name is unknown or the device is not available here."""


class DtypeError(DeviceError):
    """A dtype name is unknown, or the device cannot compute in that dtype."""


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda, then mps, then cpu; 'cpu', 'cuda' and 'mps' are checked for
    availability. With 'cpu' nothing queries CUDA.

    Raises:
        DeviceError: for an unknown name or a device that is not available here.
    """
    if name == "cpu":
        return torch.device("cpu")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    available = {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    if name not in available:
        raise DeviceError(f"unknown device {name!r}: use {', '.join(DEVICE_NAMES)}")
    if not available[name]():
        raise DeviceError(f"device {name} is not available here; use cpu or auto")
    return torch.device(name)


@functools.cache  # read once: Muon asks at every step, and the CPU does not change
def cpu_has_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 matrix products in hardware: Linux lists
    avx512_bf16 or amx_bf16 in /proc/cpuinfo. Without them (most laptops and many
    servers), PyTorch emulates bfloat16 products, many times slower than float32
    (docs/benchmarks.md); False where there is no /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = set(cpuinfo.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def cuda_has_bfloat16() -> bool:
    """Whether the current CUDA GPU computes in bfloat16 in hardware (compute capability
    8.0, Ampere, or later; any ROCm GPU). ``torch.cuda.is_bf16_supported()`` alone also
    says yes for an older GPU, where bfloat16 is emulated and slower than float32."""
    return torch.cuda.is_bf16_supported(including_emulation=False)


def mps_has_bfloat16() -> bool:
    """Whether MPS computes in bfloat16 here: macOS 14 or later."""
    return torch.backends.mps.is_macos_or_newer(14, 0)


def auto_dtype(device: torch.device) -> torch.dtype:
    """What `auto` computes in on ``device``: bfloat16 on a CUDA GPU with bfloat16
    arithmetic, float16 on an older CUDA GPU, float32 on CPU and MPS (nothing queries
    CUDA for them)."""
    if device.type == "cuda":
        return torch.bfloat16 if cuda_has_bfloat16() else torch.float16
    return torch.float32


def unsupported_dtype(dtype: torch.dtype, device: torch.device) -> str | None:
    """Why ``device`` cannot compute in ``dtype`` (as words that follow "dtype X:"), or
    None if it can. CPUs run every dtype (bfloat16 and float16 pay off only where the CPU
    has instructions for them; docs/precision.md says how to tell)."""
    if dtype != torch.bfloat16:
        return None
    if device.type == "cuda" and not cuda_has_bfloat16():
        return (
            "this GPU has no bfloat16 arithmetic (NVIDIA's begins with compute capability "
            "8.0, Ampere: the A100, RTX 30xx; a T4 or a V100 has none)"
        )
    if device.type == "mps" and not mps_has_bfloat16():
        return "bfloat16 on MPS needs macOS 14 or later"
    return None


def resolve_dtype(name: str, device: torch.device, setting: str = "--dtype") -> torch.dtype:
    """The dtype that ``name`` (one of DTYPE_NAMES) computes in on ``device``.

    Args:
        name: auto, float32, bfloat16 or float16.
        device: where the model runs.
        setting: how the user gave the choice, for the message (``--dtype``,
            ``train.dtype``).

    Raises:
        DtypeError: naming ``setting``, for an unknown name or a dtype the device cannot
            compute in (bfloat16 on a GPU without it), with the choices that work.
    """
    if name not in DTYPE_NAMES:
        raise DtypeError(f"unknown {setting} {name!r}: use {', '.join(DTYPE_NAMES)}")
    if name == "auto":
        return auto_dtype(device)
    dtype = getattr(torch, name)
    problem = unsupported_dtype(dtype, device)
    if problem:
        raise DtypeError(
            f"{setting}={name} cannot run on {device.type}: {problem}; use float16 (training "
            "adds loss scaling), float32 or auto"
        )
    return dtype


def autocast_context(device: torch.device, dtype: torch.dtype | None = None):
    """The context forward passes run in: ``torch.autocast`` in ``dtype`` (None: what
    `auto_dtype` gives for ``device``); for float32 a no-op context, so that a float32
    run computes exactly as plain PyTorch does."""
    dtype = auto_dtype(device) if dtype is None else dtype
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
