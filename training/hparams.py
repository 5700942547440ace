"""A run's hyperparameters and metrics as summaries for TensorBoard's HParams tab.

Two summaries, written in the run's own folder with TensorBoard's hparams API:

- the session start: this run's hyperparameters (its resolved config, flattened);
- the experiment: which hyperparameters and metrics the table has. Declaring the
  metrics fixes their order and names: TensorBoard ticks the first five columns by
  default, and without a declaration it orders the scalars alphabetically, which puts
  train/* first and leaves the validation metrics unticked. Every run writes the same
  declaration (the plugin reads one of them). A hyperparameter is marked as "differs"
  when this run's value is not the project default, so the table's default columns
  show what the run changed.

torch's ``SummaryWriter.add_hparams`` is not used: it writes to a sub-folder, a second
"run" per run. TensorBoard's own ``hparams.summary`` helpers need TensorFlow, so the
summaries are built here from the plugin's protocol buffers.
"""

import time

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

from training.config import RunConfig, flatten, keys_marked

# Settings of where and how to run, not of the experiment: they differ between runs
# that are the same experiment, or between the segments of one resumed run. They are
# the fields marked hyperparameter=False.
NOT_HYPERPARAMETERS = keys_marked("hyperparameter", False)


def hyperparameters(config: dict) -> dict:
    """The hyperparameters of a run: its resolved config (``RunConfig.to_dict()``),
    flattened to dotted keys, without NOT_HYPERPARAMETERS; None becomes "null"."""
    return {
        key: "null" if value is None else value
        for key, value in flatten(config).items()
        if key not in NOT_HYPERPARAMETERS
    }


def _data_type(value) -> int:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return api_pb2.DATA_TYPE_BOOL
    if isinstance(value, (int, float)):
        return api_pb2.DATA_TYPE_FLOAT64
    return api_pb2.DATA_TYPE_STRING


def _summary(tag: str, content: plugin_data_pb2.HParamsPluginData) -> Summary:
    value = Summary.Value(
        tag=tag, metadata=metadata.create_summary_metadata(content), tensor=metadata.NULL_TENSOR
    )
    return Summary(value=[value])


def hparams_summaries(config: dict, metrics: dict[str, str]) -> list[Summary]:
    """The experiment and session-start summaries for one run.

    Args:
        config: the run's resolved config (``RunConfig.to_dict()``).
        metrics: {scalar tag: display name}, in the order the table should show them.

    Returns:
        [experiment summary, session start summary], to write with
        ``writer.file_writer.add_summary``.
    """
    values = hyperparameters(config)
    defaults = hyperparameters(RunConfig().to_dict())
    hparam_infos = [
        api_pb2.HParamInfo(name=name, type=_data_type(value), differs=value != defaults.get(name))
        for name, value in values.items()
    ]
    metric_infos = [
        api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag), display_name=display)
        for tag, display in metrics.items()
    ]
    now = time.time()
    experiment = api_pb2.Experiment(
        time_created_secs=now, hparam_infos=hparam_infos, metric_infos=metric_infos
    )
    session = plugin_data_pb2.SessionStartInfo(start_time_secs=now)
    for name, value in values.items():
        if isinstance(value, bool):  # before int: bool is an int subclass
            session.hparams[name].bool_value = value
        elif isinstance(value, (int, float)):
            session.hparams[name].number_value = value
        else:
            session.hparams[name].string_value = str(value)
    return [
        _summary(metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)),
        _summary(
            metadata.SESSION_START_INFO_TAG,
            plugin_data_pb2.HParamsPluginData(session_start_info=session),
        ),
    ]
