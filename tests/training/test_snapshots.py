"""Snapshots (training/snapshots.py, viz/snapshots.py): which steps, what each holds,
consistent across an interrupt and resume, rank 0 only, within their size bound,
removed with the run on overwrite."""

import json
import math
import shutil
import signal
import types

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint, model_from_checkpoint
from tests.conftest import read_scalars, tiny_overrides
from tests.training.conftest import SHARES_STRAIGHT_RUN, STRAIGHT, SignalAt
from training import load_config, train
from training.loop import Trainer
from training.snapshots import half_precision_weights, snapshot_steps
from training.watch import RunWatch
from viz.snapshots import SNAPSHOTS_DIR, SnapshotError, nearest_snapshot, read_snapshot_index


def test_snapshot_steps_are_spread_logarithmically():
    assert snapshot_steps(10, 6) == [1, 2, 3, 4, 6, 10]
    steps = snapshot_steps(2200, 16)
    assert steps[:6] == [1, 2, 3, 5, 8, 13] and steps[-1] == 2200 and len(steps) == 16
    assert snapshot_steps(3, 16) == [1, 2, 3]  # a short run gets fewer
    assert snapshot_steps(500, 0) == []


def test_the_cpu_recipes_snapshots_stay_within_30_mb():
    cfg = load_config("configs/shakespeare_char_cpu.yaml", ["model.vocab_size=65"])
    model = GPT(GPTConfig(**vars(cfg.model)))
    one = sum(t.numel() * t.element_size() for t in half_precision_weights(model).values())
    count = len(snapshot_steps(cfg.train.max_iters, cfg.train.snapshots)) + 1  # + the best
    assert one * count < 30e6, (one, count)


@SHARES_STRAIGHT_RUN
def test_a_run_keeps_its_snapshots_with_step_loss_and_sample(straight_run):
    straight = straight_run.out_dir
    entries = read_snapshot_index(straight)
    steps = [e["step"] for e in entries]
    # The schedule, plus evaluation 9 if it was the best so far (evaluations: 3, 6, 9, 10).
    assert {1, 2, 3, 4, 6, 10} <= set(steps) <= {1, 2, 3, 4, 6, 9, 10}
    assert sum(e["best"] for e in entries) == 1
    ckpt = load_checkpoint(straight / "ckpt.pt")
    last = entries[-1]
    assert last["step"] == 10 and last["sample"].startswith("ROMEO:")
    snap = load_checkpoint(straight / SNAPSHOTS_DIR / last["file"])
    assert snap["model"]["token_embedding.weight"].dtype == torch.float16
    # The last snapshot is the final weights, rounded to float16.
    for name, tensor in ckpt["model"].items():
        torch.testing.assert_close(snap["model"][name].float(), tensor, rtol=1e-3, atol=1e-3)
    model, _ = model_from_checkpoint(snap)  # loads as any checkpoint does
    assert model.token_embedding.weight.dtype == torch.float32
    assert nearest_snapshot(straight, 5)[1]["step"] == 4  # 4 and 6: the earlier
    assert nearest_snapshot(straight, 1000)[1]["step"] == 10


@SHARES_STRAIGHT_RUN
def test_head_scores_and_snapshot_samples_reach_tensorboard(straight_run):
    straight = straight_run.out_dir
    scalars = read_scalars(straight)
    steps = [e["step"] for e in read_snapshot_index(straight)]
    for measure in ("entropy", "previous_char", "first_position", "induction"):
        logged = scalars[f"per_head_{measure}/layer_1_head_1"]
        assert sorted({s for s, _ in logged}) == sorted({*steps, 3, 6, 9, 10})
    # A uniform row i has entropy ln(i + 1): no head's mean over 32 rows exceeds that mean.
    bound = sum(math.log(i + 1) for i in range(32)) / 32
    assert all(0 <= v <= bound + 1e-5 for _, v in scalars["per_head_entropy/layer_0_head_0"])
    acc = EventAccumulator(str(straight), size_guidance={"tensors": 0})
    acc.Reload()
    texts = {
        e.step: e.tensor_proto.string_val[0].decode()
        for e in acc.Tensors("snapshots/sample/text_summary")
    }
    # Evaluation 9's best was replaced by step 10's: its file went, its text stays.
    assert set(steps) <= set(texts) <= {*steps, 9}
    assert texts[10].startswith("step 10: validation loss ") and "ROMEO:" in texts[10]


@pytest.mark.slow
@SHARES_STRAIGHT_RUN
def test_snapshots_survive_an_interrupt_and_resume(straight_run, tmp_path, shakespeare_path):
    straight = straight_run.out_dir
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, **STRAIGHT))
    trainer = Trainer(cfg)
    trainer.sampler.next_batch = SignalAt(trainer.sampler.next_batch, at=4, sig=signal.SIGINT)
    assert trainer.run().iter_num == 4
    run = tmp_path / "run"
    assert [e["step"] for e in read_snapshot_index(run)] == [1, 2, 3, 4]
    # A run killed after a snapshot and before its checkpoint leaves one past it.
    folder = run / SNAPSHOTS_DIR
    shutil.copy(folder / "step_0000004.pt", folder / "step_0000005.pt")
    index = json.loads((folder / "index.json").read_text())
    index["snapshots"].append({**index["snapshots"][-1], "step": 5, "file": "step_0000005.pt"})
    (folder / "index.json").write_text(json.dumps(index))
    resumed = tiny_overrides(tmp_path, shakespeare_path, **STRAIGHT, **{"train.resume": True})
    train(load_config(None, resumed))
    assert read_snapshot_index(run) == read_snapshot_index(straight)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(p.name for p in (straight / SNAPSHOTS_DIR).iterdir())
    for name in names:
        if name.endswith(".pt"):
            a, b = (
                load_checkpoint(folder / name),
                load_checkpoint(straight / SNAPSHOTS_DIR / name),
            )
            assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_other_ranks_write_no_snapshots(tmp_path):
    trainer = types.SimpleNamespace(
        cfg=None, dist=types.SimpleNamespace(is_main=False), out_dir=tmp_path
    )
    watch = RunWatch(trainer, start=0)
    watch.after_step(1, model=None)
    assert watch.end_lines() == [] and not (tmp_path / SNAPSHOTS_DIR).exists()


def test_overwrite_removes_the_earlier_runs_snapshots(tmp_path, shakespeare_path):
    settings = {"train.max_iters": 3, "train.snapshots": 2, "train.sample_tokens": 0}
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **settings)))
    stray = tmp_path / "run" / SNAPSHOTS_DIR / "step_0000999.pt"
    stray.write_bytes(b"x")
    again = {**settings, "train.overwrite": True, "train.snapshots": 0}
    train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **again)))
    assert not (tmp_path / "run" / SNAPSHOTS_DIR).exists()
    with pytest.raises(SnapshotError, match="train.snapshots"):
        nearest_snapshot(tmp_path / "run", 3)
