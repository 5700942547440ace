"""Choosing the device and the matching mixed-precision context."""

import contextlib

import torch

from training.config import ConfigError


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda, then mps, then cpu; other names are checked for availability.

    With 'cpu' nothing queries CUDA.

    Raises:
        ConfigError: if the requested device is not available here.
    """
    if name == "cpu":
        return torch.device("cpu")
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but CUDA is not available here; use device=cpu or auto")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device=mps but MPS is not available here; use device=cpu or auto")
    return torch.device(name)


def autocast_context(device: torch.device):
    """bf16 autocast on CUDA GPUs that support it; a no-op context elsewhere."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
