"""Choosing the device and the matching mixed-precision context."""

import contextlib

import torch

from model import device as model_device
from training.config import ConfigError


def resolve_device(name: str) -> torch.device:
    """`model.device.resolve_device`, with its errors as ConfigError for the run config.

    Raises:
        ConfigError: for an unknown name or a device that is not available here.
    """
    try:
        return model_device.resolve_device(name)
    except model_device.DeviceError as e:
        raise ConfigError(str(e)) from None


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
