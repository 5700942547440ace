"""Choosing the device and the matching mixed-precision context."""

import contextlib
import typing

import torch

from training.config import ConfigError, Device


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda, then mps, then cpu; 'cpu', 'cuda' and 'mps' are checked for
    availability. With 'cpu' nothing queries CUDA.

    Raises:
        ConfigError: for an unknown name or a device that is not available here.
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
        raise ConfigError(f"unknown device {name!r}: use {', '.join(typing.get_args(Device))}")
    if not available[name]():
        raise ConfigError(f"device {name} is not available here; use cpu or auto")
    return torch.device(name)


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The dtype training's matrix products run in under autocast: bfloat16 on CUDA GPUs
    that support it, None (no autocast: float32) elsewhere."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return None


def autocast_context(device: torch.device):
    """bf16 autocast on CUDA GPUs that support it; a no-op context elsewhere."""
    dtype = autocast_dtype(device)
    if dtype is not None:
        return torch.autocast(device_type=device.type, dtype=dtype)
    return contextlib.nullcontext()
