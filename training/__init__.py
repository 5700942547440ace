"""Training: run configuration, optimizer, schedule, evaluation, checkpoints, the loop.

Reading a checkpoint needs no trainer: `model.checkpoint` has `load_checkpoint`,
`model_from_checkpoint` and `CheckpointError`.

The names below are imported on first use (PEP 562): importing one module of the
package (the run config, say) does not load the loop and TensorBoard.
"""

import importlib

_HOMES = {
    "ConfigError": "training.config",
    "RunConfig": "training.config",
    "TrainResult": "training.report",
    "load_config": "training.config",
    "train": "training.loop",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    """Import ``name`` from its module the first time it is asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module 'training' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
