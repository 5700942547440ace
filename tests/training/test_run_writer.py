"""What TensorBoard shows of a run, opened with the command the run prints: every
evaluation's heatmaps and sample. By default TensorBoard keeps 10 image steps and 10
text steps per tag (reservoir sampling): after 15 evaluations one in three was gone."""

import json
import shlex

import numpy as np
import pytest
from tensorboard import default, program
from tensorboard.backend import application
from tensorboard.backend.event_processing.data_ingester import LocalDataIngester
from werkzeug.test import Client

from tests.conftest import tiny_overrides
from training import load_config, train
from training.run_writer import RunWriter, tensorboard_command
from viz.run_events import ATTENTION_IMAGE, SAMPLE_TEXT

STEPS = [10 * s for s in range(1, 16)]  # 15 evaluations


def shown_steps(command: str, logdir) -> dict[str, list[int]]:
    """The steps TensorBoard's own pages list for the heatmap and sample tags, for a
    `tensorboard ...` command line (its Python loader: the one every install has)."""
    argv = shlex.split(command)
    assert argv[0] == "tensorboard"
    argv[argv.index("--logdir") + 1] = str(logdir)
    tb = program.TensorBoard(plugins=default.get_plugins())
    tb.configure(argv=argv + ["--load_fast", "false", "--reload_interval", "0"])
    ingester = LocalDataIngester(tb.flags)
    ingester.start()  # reload_interval 0: loads once, now
    app = application.TensorBoardWSGIApp(
        tb.flags,
        tb.plugin_loaders,
        ingester.data_provider,
        tb.assets_zip_provider,
        ingester.deprecated_multiplexer,
    )
    client = Client(app)

    def steps(url: str) -> list[int]:
        return [entry["step"] for entry in json.loads(client.get(url).get_data())]

    image_tag = ATTENTION_IMAGE.format(layer=0)
    return {
        "images": steps(f"/data/plugin/images/images?run=run&tag={image_tag}&sample=0"),
        "text": steps(f"/data/plugin/text/text?run=run&tag={SAMPLE_TEXT}/text_summary"),
    }


@pytest.fixture(scope="module")
def fifteen_evaluations(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("runs")
    writer = RunWriter(logdir / "run")
    for step in STEPS:
        writer.attention(step, [np.full((4, 4, 3), step % 256, dtype=np.uint8)])
        writer.sample(step, f"sample at step {step}")
    writer.close()
    return logdir


def test_the_printed_command_shows_every_evaluation(fifteen_evaluations):
    command = tensorboard_command("runs", evaluations=len(STEPS))
    assert command == "tensorboard --logdir runs --samples_per_plugin images=1000,text=1000"
    assert shown_steps(command, fifteen_evaluations) == {"images": STEPS, "text": STEPS}


def test_without_the_flag_steps_are_dropped(fifteen_evaluations):
    """Why the flag is needed (TensorBoard's behaviour, not ours)."""
    shown = shown_steps("tensorboard --logdir runs", fifteen_evaluations)
    assert len(shown["images"]) == len(shown["text"]) == 10
    # "0", which TensorBoard's help reads as "keep all", shows no image at all.
    zero = shown_steps(
        "tensorboard --logdir runs --samples_per_plugin images=0", fifteen_evaluations
    )
    assert zero["images"] == []


def test_a_longer_run_gets_a_flag_that_keeps_all_of_its_steps():
    command = tensorboard_command("runs", evaluations=2001, logged=50_000)
    assert command.endswith("--samples_per_plugin scalars=50000,images=2001,text=2001")


def test_the_run_prints_the_command(tmp_path, shakespeare_path, capsys):
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **{"train.max_iters": 1})))
    command = tensorboard_command(tmp_path, evaluations=2)
    out = capsys.readouterr().out
    assert f"every evaluation's sample and heatmaps: {command}; open http://localhost:6006/" in out
