"""Choosing the device a model runs on, by name (the `device` setting and --device),
and the mixed-precision context its forward passes run in there."""

import contextlib

import torch

DEVICE_NAMES = ("auto", "cpu", "cuda", "mps")


class DeviceError(ValueError):
    """A device name is unknown or the device is not available here."""


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


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype matrix products run in under autocast: bfloat16 on CUDA GPUs that
    support it, None (no autocast: float32) elsewhere."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return None


def autocast_context(device: torch.device):
    """bf16 autocast on CUDA GPUs that support it; a no-op context elsewhere."""
    dtype = autocast_dtype(device)
    if dtype is not None:
        return torch.autocast(device_type=device.type, dtype=dtype)
    return contextlib.nullcontext()
