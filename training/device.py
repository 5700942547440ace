"""Choosing the device and the matching mixed-precision context, for the run config.

The mixed-precision context is `model.device`'s (evaluate.py uses it without the
trainer); it is importable from here too.
"""

import torch

from model import device as model_device
from model.device import autocast_context, autocast_dtype
from training.config import ConfigError

__all__ = ["autocast_context", "autocast_dtype", "resolve_device"]


def resolve_device(name: str) -> torch.device:
    """`model.device.resolve_device`, with its errors as ConfigError for the run config.

    Raises:
        ConfigError: for an unknown name or a device that is not available here.
    """
    try:
        return model_device.resolve_device(name)
    except model_device.DeviceError as e:
        raise ConfigError(str(e)) from None
