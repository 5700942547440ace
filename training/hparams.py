"""A run's hyperparameters as a summary for TensorBoard's HParams tab.

Only the SessionStartInfo summary is written, in the run's own folder: the HParams
plugin then builds the table from every run's hyperparameters and shows, as metrics,
the last value of each scalar each run logged (val/loss, val/best_loss, ...), i.e. its
final metrics. torch's ``SummaryWriter.add_hparams`` is not used because it writes to
a new sub-folder (a second "run" per run) and adds an Experiment summary that makes
the plugin take one run's hyperparameter list for all.
"""

import time

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import metadata, plugin_data_pb2

# Settings of where and how to run, not of the experiment: they differ between runs
# that are the same experiment, or between the segments of one resumed run.
NOT_HYPERPARAMETERS = ("out_dir", "data.cache_dir", "train.resume", "train.overwrite")


def flatten_config(tree: dict, prefix: str = "") -> dict:
    """{"train": {"learning_rate": 1e-3}} -> {"train.learning_rate": 1e-3}."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten_config(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def hyperparameters(config: dict) -> dict:
    """The hyperparameters of a run: its resolved config (``RunConfig.to_dict()``),
    flattened to dotted keys, without NOT_HYPERPARAMETERS."""
    return {k: v for k, v in flatten_config(config).items() if k not in NOT_HYPERPARAMETERS}


def session_start_summary(hparams: dict, start_time: float | None = None) -> Summary:
    """The HParams plugin's SessionStartInfo summary for one run.

    Args:
        hparams: {name: value}; bools, numbers and strings keep their type, None is
            written as the string "null", anything else as its str().
        start_time: seconds since the epoch; default now.

    Returns:
        A ``Summary`` to write with ``writer.file_writer.add_summary``.
    """
    info = plugin_data_pb2.SessionStartInfo(
        start_time_secs=time.time() if start_time is None else start_time
    )
    for name, value in hparams.items():
        if isinstance(value, bool):  # before int: bool is an int subclass
            info.hparams[name].bool_value = value
        elif isinstance(value, (int, float)):
            info.hparams[name].number_value = value
        else:
            info.hparams[name].string_value = "null" if value is None else str(value)
    content = plugin_data_pb2.HParamsPluginData(session_start_info=info)
    value = Summary.Value(
        tag=metadata.SESSION_START_INFO_TAG,
        metadata=metadata.create_summary_metadata(content),
        tensor=metadata.NULL_TENSOR,
    )
    return Summary(value=[value])
