"""bench/recipe_search.py: candidates read from flags and files, steps fitted to a time
budget, a tiny candidate trained end to end with its figures read back from its run,
a bad candidate refused before anything trains."""

import json
import sys

import pytest

from tests.conftest import ROOT, read_scalars, shakespeare
from training.config import load_config
from viz.run_events import VAL_FULL_LOSS

sys.path.insert(0, str(ROOT / "bench"))
import recipe_search  # noqa: E402

TINY = (
    "model.n_layer=1 model.n_head=2 model.n_embd=32 train.compile=false train.max_iters=8 "
    "train.eval_interval=4 data.val_fraction=0.01 train.sample_tokens=0 "
    "train.attention_prompt=''"
)


def test_candidates_from_flags_and_files(tmp_path):
    listed = tmp_path / "candidates.txt"
    listed.write_text("# a comment\nbase:\n\nwide: model.n_embd=192  # why\n", encoding="utf-8")
    candidates = recipe_search.read_candidates(["bf16: train.dtype=bfloat16"], [str(listed)])
    assert candidates == [
        ("base", []),
        ("wide", ["model.n_embd=192"]),
        ("bf16", ["train.dtype=bfloat16"]),
    ]
    with pytest.raises(ValueError, match="must look like 'NAME: section.key=value"):
        recipe_search.parse_candidate("train.dtype=bfloat16")
    with pytest.raises(ValueError, match="override 'bfloat16' must be section.key=value"):
        recipe_search.parse_candidate("bf16: bfloat16")
    with pytest.raises(ValueError, match="names must differ"):
        recipe_search.read_candidates(["a: train.dtype=float16", "a:"], [])
    shipped = recipe_search.read_candidates([], [str(ROOT / "bench/recipe_candidates.txt")])
    for _, overrides in shipped:  # every shipped candidate is a valid config
        load_config(recipe_search.BASE, overrides)


def test_steps_fitted_to_the_budget():
    base = load_config(recipe_search.BASE)  # 2,200 steps, the last 400 averaged
    fitted = recipe_search.fitted_overrides(base, [], 100.0, 283.0, 30.0)
    # (283 - 30) s at 100 ms a step: 2,530 steps, rounded down to 2,500.
    assert fitted == ["train.max_iters=2500", "train.eval_interval=625", "train.ema_start=2100"]
    given = recipe_search.fitted_overrides(base, ["train.ema_start=0"], 100.0, 283.0, 30.0)
    assert given == ["train.max_iters=2500", "train.eval_interval=625"]
    with pytest.raises(ValueError, match="fewer than 100 steps fit in 40 s"):
        recipe_search.fitted_overrides(base, [], 200.0, 40.0, 30.0)


def test_a_candidate_trains_and_its_whole_split_loss_is_read_back(tmp_path, capsys):
    shakespeare()
    out = tmp_path / "search"
    code = recipe_search.main(["--out", str(out), "--candidate", f"tiny: {TINY}"])
    assert code == 0
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    full = read_scalars(out / "tiny")[VAL_FULL_LOSS]
    assert row["whole_val_loss"] == pytest.approx(full[-1][1]) and row["max_iters"] == 8
    assert row["returncode"] == 0 and 0 < row["steps_s"] < row["wall_s"] <= row["command_s"]
    table = capsys.readouterr().out.splitlines()[-3:]
    assert table[0].startswith("| candidate | overrides | steps | whole val (nats/char) |")
    assert table[2].startswith("| tiny | ") and f"| {row['whole_val_loss']:.4f} |" in table[2]


def test_a_bad_candidate_is_refused_before_anything_trains(tmp_path, capsys):
    out = tmp_path / "search"
    args = ["--out", str(out), "--candidate", "ok:", "--candidate", "odd: model.n_embd=30"]
    assert recipe_search.main(args) == 2
    assert "candidate odd: invalid configuration" in capsys.readouterr().err
    assert not out.exists()
