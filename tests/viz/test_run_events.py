"""What a run writes to TensorBoard besides scalars (sample text, attention images,
hyperparameters), read back with TensorBoard's own event reader; and the loss plot."""

import io

import matplotlib.image
import numpy as np
import pytest
from matplotlib import colormaps
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

import plot_losses
from data import CharTokenizer
from model.checkpoint import load_checkpoint, model_from_checkpoint
from tests.conftest import TEST_DEVICE, shakespeare, tiny_overrides
from training import ConfigError, load_config, train
from training.run_writer import (
    PromptFallbackWarning,
    TensorBoardViews,
    usable_prompt,
)
from viz.grid_layout import GridLayout, label_inches, panel_inches
from viz.loss_plot import LOSS_TAGS, loss_figure
from viz.run_events import (
    ATTENTION_IMAGE,
    LOSS_TRAIN,
    LOSS_VAL,
    SAMPLE_TEXT,
    TIME_PART,
    TIME_WALL,
    TRAIN_LOSS,
    VAL_BEST_LOSS,
    VAL_BPC,
    VAL_LOSS,
    read_scalar_curves,
)

ATTENTION_PROMPT = "To be, or not"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One tiny training run (6 steps, evaluations at 3 and 6), shared by these tests."""
    extra = {"train.attention_prompt": f"'{ATTENTION_PROMPT}'"}
    cfg = load_config(
        None, tiny_overrides(tmp_path_factory.mktemp("views"), shakespeare(), **extra)
    )
    return cfg, train(cfg)


def read_events(folder) -> EventAccumulator:
    acc = EventAccumulator(str(folder), size_guidance={"images": 0, "tensors": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_attention_images_one_per_layer_at_each_evaluation(run):
    cfg, result = run
    acc = read_events(result.out_dir)
    assert sorted(acc.Tags()["images"]) == [ATTENTION_IMAGE.format(layer=i) for i in (0, 1)]
    T = len(ATTENTION_PROMPT)
    layout = GridLayout(panel_inches(T), 1, 2, label_inches(list("Tobe,␣")), titled=True)
    for tag in acc.Tags()["images"]:
        events = acc.Images(tag)
        assert [e.step for e in events] == [3, 6]
        for e in events:
            pixels = matplotlib.image.imread(io.BytesIO(e.encoded_image_string), format="png")
            assert pixels.shape[:2] == (e.height, e.width)
            assert abs(e.width - layout.width * 100) < 1
            assert abs(e.height - layout.height * 100) < 1
            # Character 0 can only attend to itself (weight 1: the top of the colour
            # scale); its view of the last character is masked (grey).
            left, _, _, top = layout.margins
            cell = layout.side / T
            y = round((top + cell / 2) * 100)
            first = pixels[y, round((left + cell / 2) * 100), :3]
            future = pixels[y, round((left + layout.side - cell / 2) * 100), :3]
            np.testing.assert_allclose(first, colormaps["viridis"](1.0)[:3], atol=0.02)
            np.testing.assert_allclose(future, [0xE6 / 255] * 3, atol=0.02)


def sample_texts(acc) -> dict[int, str]:
    """{step: sample} from the text summaries, without the markdown indentation."""
    texts = {}
    # SummaryWriter.add_text files the text under TAG/text_summary.
    for event in acc.Tensors(f"{SAMPLE_TEXT}/text_summary"):
        markdown = event.tensor_proto.string_val[0].decode("utf-8")
        header, body = markdown.split("\n\n", 1)
        assert header.startswith("prompt 'ROMEO:', seed 1337")
        texts[event.step] = "\n".join(line[4:] for line in body.split("\n"))
    return texts


def test_sample_text_comes_from_the_fixed_prompt_and_seed(run):
    cfg, result = run
    texts = sample_texts(read_events(result.out_dir))
    assert sorted(texts) == [3, 6]
    for text in texts.values():
        assert text.startswith("ROMEO:") and len(text) == len("ROMEO:") + 16
    # The same checkpoint, prompt and seed give the same text again (on the run's device:
    # the seed drives that device's generator).
    ckpt = load_checkpoint(result.out_dir / "ckpt.pt")
    model, tokenizer = model_from_checkpoint(ckpt)
    model.to(TEST_DEVICE)
    views = TensorBoardViews(cfg, tokenizer, np.zeros(0, dtype=np.uint16))
    assert views.sample(model) == texts[6]
    # A snapshot's shorter sample is the start of it (same prompt, same seed).
    assert views.sample(model, 5) == texts[6][: len("ROMEO:") + 5]
    assert views.sample(model, 500) == texts[6]  # never longer than train.sample_tokens
    # At an evaluation's step, a snapshot's sample is cut from the evaluation's.
    views.last_sample = (6, texts[6])
    assert views.sample_start(None, 6, 5) == texts[6][: len("ROMEO:") + 5]  # no model run
    assert views.sample_start(model, 7, 5) == texts[6][: len("ROMEO:") + 5]  # generated


def test_hyperparameters_and_final_metrics_for_the_hparams_tab(run):
    cfg, result = run
    acc = read_events(result.out_dir)
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    # The run's hyperparameters only: TensorBoard builds the table's columns from every
    # run's (see test_hparams_flags_what_differs_between_the_runs_of_a_logdir).
    assert set(content) == {metadata.SESSION_START_INFO_TAG}
    hparams = metadata.parse_session_start_info_plugin_data(
        content[metadata.SESSION_START_INFO_TAG]
    ).hparams
    assert hparams["model.n_layer"].number_value == 2
    assert hparams["model.vocab_size"].number_value == 65
    assert hparams["train.learning_rate"].number_value == pytest.approx(1e-3)
    assert hparams["model.bias"].bool_value is True
    assert hparams["train.attention_prompt"].string_value == ATTENTION_PROMPT
    assert hparams["data.path"].string_value == str(shakespeare())
    assert "out_dir" not in hparams and "train.resume" not in hparams
    # The plugin's metrics are the last value of each scalar: the final val/loss and
    # the best validation loss are there.
    best = [e.value for e in acc.Scalars(VAL_BEST_LOSS)]
    val = [e.value for e in acc.Scalars(VAL_LOSS)]
    assert best == pytest.approx(list(np.minimum.accumulate(val)))
    assert best[-1] == pytest.approx(result.best_val_loss, rel=1e-6)


def tensorboard_experiment(logdir):
    """The HParams table's columns as TensorBoard 2.x serves them for ``logdir``
    (its hparams plugin's GetExperiment, over its own event reader)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, get_experiment

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    tb = base_plugin.TBContext(logdir=str(logdir), multiplexer=multiplexer, data_provider=provider)
    handler = get_experiment.Handler(
        context.RequestContext(),
        backend_context.Context(tb),
        "",
        api_pb2.GetExperimentRequest(),
    )
    return handler.run()


def test_hparams_flags_what_differs_between_the_runs_of_a_logdir(tmp_path, shakespeare_path):
    """Two runs in one logdir, weight_decay 0.1 and 0.0, the rest equal but for the
    recipe's own choices: TensorBoard flags weight_decay as differing, and nothing
    else. Each run used to write an experiment summary flagging what differed from the
    project defaults, of which TensorBoard read one: it missed weight_decay (0.1 is the
    default) and flagged n_embd and max_iters, equal in both (tensorboard#6965, #5596).
    """
    quiet = {"train.sample_tokens": 0, "train.attention_prompt": "''", "train.max_iters": 2}
    for name, decay in (("run_a", 0.1), ("run_b", 0.0)):
        overrides = tiny_overrides(tmp_path, shakespeare_path, out_dir=tmp_path / name, **quiet)
        train(load_config(None, [*overrides, f"train.weight_decay={decay}"]))
    experiment = tensorboard_experiment(tmp_path)
    differs = {h.name for h in experiment.hparam_infos if h.differs}
    assert differs == {"train.weight_decay"}
    assert {"model.n_embd", "train.max_iters"} <= {h.name for h in experiment.hparam_infos}
    # The table shows its first five columns; the differing ones come first.
    assert experiment.hparam_infos[0].name == "train.weight_decay"
    metrics = [m.name.tag for m in experiment.metric_infos]
    assert {VAL_LOSS, VAL_BPC, VAL_BEST_LOSS, TRAIN_LOSS} <= set(metrics)
    # The table ticks its first five metric columns, in tag order: the two losses lead.
    assert metrics[:2] == [LOSS_TRAIN, LOSS_VAL]


def test_views_leave_the_training_losses_unchanged(run, tmp_path):
    _, result = run
    quiet = {"train.sample_tokens": 0, "train.attention_prompt": "''"}
    plain = train(load_config(None, tiny_overrides(tmp_path, shakespeare(), **quiet)))
    assert plain.losses == result.losses  # sampling used its own RNG, in eval mode
    acc = read_events(plain.out_dir)
    assert acc.Tags()["images"] == []
    assert not [tag for tag in acc.Tags()["tensors"] if tag.startswith(SAMPLE_TEXT)]


def test_loss_plot_reads_the_event_files(run, tmp_path, capsys):
    _, result = run
    curves = read_scalar_curves(result.out_dir, list(LOSS_TAGS))
    assert list(curves[TRAIN_LOSS].steps) == [1, 2, 3, 4, 5, 6]
    assert list(curves[VAL_LOSS].steps) == [3, 6]
    assert curves[VAL_LOSS].values[-1] == pytest.approx(result.best_val_loss, rel=1e-6)
    seconds = curves[TRAIN_LOSS].seconds
    assert seconds[0] >= 0 and np.all(np.diff(seconds) >= 0)
    fig = loss_figure(curves)
    by_step, by_time = fig.axes
    for ax, x in ((by_step, "steps"), (by_time, "seconds")):
        assert len(ax.lines) == 3
        for line, tag in zip(ax.lines, LOSS_TAGS, strict=True):
            np.testing.assert_array_equal(line.get_xdata(), getattr(curves[tag], x))
            np.testing.assert_array_equal(line.get_ydata(), curves[tag].values)
    png = tmp_path / "losses.png"
    assert plot_losses.main(["--out-dir", str(result.out_dir), "--png", str(png)]) == 0
    assert matplotlib.image.imread(png).shape[:2] == (400, 1100)  # 11 x 4 inches at 100 dpi
    assert "at step 6" in capsys.readouterr().out
    assert plot_losses.main(["--out-dir", str(tmp_path)]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err


def test_loss_plot_names_the_file_it_writes_and_refuses_what_it_cannot(run, tmp_path, capsys):
    """--png lossy (no suffix) and --png FOLDER wrote lossy.png and FOLDER.png but said
    "wrote lossy" and "wrote FOLDER"; --png x.xyz and a --png under a file ended in a
    traceback once the events were read."""
    _, result = run
    args = ["--out-dir", str(result.out_dir), "--png"]
    folder = tmp_path / "plots"
    folder.mkdir()
    for given, written in ((tmp_path / "lossy", tmp_path / "lossy.png"), (folder, None)):
        code = plot_losses.main([*args, str(given)])
        out, err = capsys.readouterr()
        if written is None:
            assert code == 2 and "Traceback" not in err
            assert f"--png {folder} is a folder: give a file name such as" in err
        else:
            assert code == 0 and out.endswith(f"wrote {written}\n")
            assert matplotlib.image.imread(written).shape[:2] == (400, 1100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lossy.png", "plots"]
    assert plot_losses.main([*args, str(tmp_path / "x.xyz")]) == 2
    err = capsys.readouterr().err
    assert "--png: cannot write .xyz files; use a name ending in .png" in err, err
    (tmp_path / "notes.txt").write_text("", encoding="utf-8")
    assert plot_losses.main([*args, str(tmp_path / "notes.txt" / "x.png")]) == 2
    assert "error: --png: cannot write" in capsys.readouterr().err


def test_prompt_the_corpus_lacks_falls_back_to_validation_text():
    tokenizer = CharTokenizer.from_text("가나다\n라마바사아자\n")
    val_ids = tokenizer.encode("다\n라마바사아자\n")
    assert usable_prompt("가나", tokenizer, val_ids, "train.sample_prompt") == "가나"
    with pytest.warns(PromptFallbackWarning, match=r"'R' \(U\+0052\).*'라마바사아자'"):
        assert usable_prompt("ROMEO:", tokenizer, val_ids, "train.sample_prompt") == "라마바사아자"
    with pytest.warns(PromptFallbackWarning, match="more than the model's context"):
        assert usable_prompt("가나다", tokenizer, val_ids, "k", max_chars=2) == "가나"


def test_config_checks_the_new_keys():
    with pytest.raises(ConfigError, match="train.sample_tokens must be >= 0"):
        load_config(None, ["train.sample_tokens=-1"])
    with pytest.raises(ConfigError, match="train.sample_prompt is empty"):
        load_config(None, ["train.sample_prompt="])
    cfg = load_config(None, ["train.sample_prompt=", "train.sample_tokens=0"])
    assert cfg.train.sample_tokens == 0 and cfg.train.attention_prompt == "To be, or not to be"


def test_attention_interval_draws_the_heatmaps_after_its_multiples_and_at_the_last_step(
    tmp_path,
):
    # Evaluations at 3, 6, 9 and 11: the first ones at or after 4 and 8 draw, and the last.
    extra = {
        "train.max_iters": 11,
        "train.eval_interval": 3,
        "train.attention_interval": 4,
        "train.final_full_eval": "false",
        "train.attention_prompt": "To be",
    }
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare(), **extra))
    acc = read_events(train(cfg).out_dir)
    assert [e.step for e in acc.Tensors(f"{SAMPLE_TEXT}/text_summary")] == [3, 6, 9, 11]
    for layer in (0, 1):
        assert [e.step for e in acc.Images(ATTENTION_IMAGE.format(layer=layer))] == [6, 9, 11]
    with pytest.raises(ConfigError, match=r"train.attention_interval must be >= 0 .*got -2"):
        load_config(None, ["train.attention_interval=-2"])


def test_a_resume_that_changes_hyperparameters_says_what_hparams_will_show(
    tmp_path, shakespeare_path, capsys
):
    """TensorBoard keeps a run's first hyperparameters: after a resume with a new
    learning rate and max_iters, its row shows the old ones beside metrics trained with
    the new, and the resumed run says so (tensorboard#3371)."""
    quiet = {"train.sample_tokens": 0, "train.attention_prompt": "''", "train.max_iters": 3}
    given = tiny_overrides(tmp_path, shakespeare_path, **quiet)
    train(load_config(None, given))
    capsys.readouterr()
    train(load_config(None, [*given, "train.resume=true"]))  # nothing to do, nothing new
    assert "HPARAMS" not in capsys.readouterr().out
    train(load_config(None, [*given, "train.resume=true", "train.max_iters=6"]))
    assert "its row will show train.max_iters=3 beside" in capsys.readouterr().out
    train(
        load_config(
            None,
            [*given, "train.resume=true", "train.max_iters=8", "train.learning_rate=5e-4"],
        )
    )
    out = capsys.readouterr().out
    assert (
        "note: TensorBoard's HPARAMS tab keeps the hyperparameters this run first started "
        "with: its row will show train.max_iters=3, train.learning_rate=0.001 beside"
    ) in out
    experiment = tensorboard_experiment(tmp_path)
    assert {h.name for h in experiment.hparam_infos} >= {"train.learning_rate"}


def tag_groups(tags) -> dict[str, list[str]]:
    """Scalar tags grouped as TensorBoard's SCALARS tab shows them: by the part before
    the first "/", groups in name order, each group's tags in name order; the first
    two groups are open when the tab opens."""
    groups = {}
    for tag in sorted(tags):
        groups.setdefault(tag.split("/")[0], []).append(tag)
    return dict(sorted(groups.items()))


def test_scalars_open_on_the_training_and_validation_losses(run):
    """The time split's nine charts sorted first (time/ before train/) and SCALARS
    opened on them (issue 33, item 21): it now sorts last, and the first group holds
    the two losses, equal to train/loss and val/loss."""
    _, result = run
    acc = read_events(result.out_dir)
    groups = tag_groups(acc.Tags()["scalars"])
    heads = [f"per_head_{m}" for m in ("entropy", "first_position", "induction", "previous_char")]
    assert list(groups) == ["loss", *heads, "train", "val", "wall_time"]
    assert groups["loss"] == [LOSS_TRAIN, LOSS_VAL]
    for copy, tag in ((LOSS_TRAIN, TRAIN_LOSS), (LOSS_VAL, VAL_LOSS)):
        pairs = [(e.step, e.value) for e in acc.Scalars(copy)]
        assert pairs == [(e.step, e.value) for e in acc.Scalars(tag)] and pairs
    assert TIME_WALL in groups["wall_time"] and TIME_PART.format(part="eval") in groups["wall_time"]


def test_an_older_runs_time_split_is_read_under_the_new_names(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path)) as writer:  # as a run before the move wrote it
        writer.add_scalar("time/eval_seconds", 1.5, 10)
        writer.add_scalar("time/wall_seconds", 4.0, 10)
        writer.add_scalar(VAL_LOSS, 2.5, 10)
    curves = read_scalar_curves(tmp_path, [TIME_PART.format(part="eval"), TIME_WALL, VAL_LOSS])
    assert curves[TIME_PART.format(part="eval")].values.tolist() == [1.5]
    assert curves[TIME_WALL].values.tolist() == [4.0]
    assert set(read_scalar_curves(tmp_path)) == {TIME_PART.format(part="eval"), TIME_WALL, VAL_LOSS}


def test_four_heads_make_a_square_heatmap_a_card_shows_at_its_width(tmp_path, shakespeare_path):
    """Four heads side by side made a strip (2,231 x 627 pixels for a 19-character
    prompt) that a TensorBoard card shows 320 pixels wide and 90 high; in two rows of
    two the card shows the whole grid about a third larger."""
    extra = {"model.n_head": 4, "train.max_iters": 3, "train.sample_tokens": 0}
    overrides = tiny_overrides(tmp_path, shakespeare_path, **extra)
    prompt = "To be, or not to be"
    result = train(load_config(None, [*overrides, f"train.attention_prompt='{prompt}'"]))
    (event,) = read_events(result.out_dir).Images(ATTENTION_IMAGE.format(layer=0))
    T = len(prompt)
    layout = GridLayout(panel_inches(T), 2, 2, label_inches(list("Tobe,␣rnt")), titled=True)
    assert abs(event.width - layout.width * 100) < 1 and abs(event.height - layout.height * 100) < 1
    assert 0.8 < event.width / event.height < 1.25
