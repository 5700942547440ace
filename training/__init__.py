"""Training: run configuration, optimizer, schedule, evaluation, checkpoints, the loop."""

from training.checkpoint import CheckpointError, load_checkpoint, model_from_checkpoint
from training.config import ConfigError, RunConfig, load_config
from training.loop import TrainResult, train

__all__ = [
    "CheckpointError",
    "ConfigError",
    "RunConfig",
    "TrainResult",
    "load_checkpoint",
    "load_config",
    "model_from_checkpoint",
    "train",
]
