"""Time to the first step with torch.compile, cold against warm: what a second start
of a recipe on the same machine reuses.

    python bench/compile_cache.py                    # the CPU recipe, 4 steps, on CPU
    python bench/compile_cache.py --config configs/shakespeare_char.yaml --device cuda
    python bench/compile_cache.py --keep /tmp/mycache   # reuse that cache dir (warm both)

Each start is a fresh process training the recipe for a few steps with an evaluation
after the first and after the last (``--steps``), in a run folder of its own:

  cold   TORCHINDUCTOR_CACHE_DIR is a new, empty directory: everything compiles
  warm   the same command again, with the directory the cold start filled
  artifacts  another empty directory, after torch.compiler.load_cache_artifacts of
         what the cold start saved with torch.compiler.save_cache_artifacts (the
         "mega-cache": a cache carried to a new machine or a wiped /tmp)

For each it gives the run's own split (see `training.report`): setup, compile (the
first step's and first compiled evaluation's time beyond the later ones'), the first
step's wall time, and how many compiled graphs Inductor and AOTAutograd found in
their caches. TorchDynamo traces the Python code again at every start in all three
(it has no on-disk cache): that is what a warm start still pays. The losses of the
three are compared: a graph from the cache must train exactly as a fresh one.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "configs" / "shakespeare_char_cpu.yaml"

CHILD = r"""
import json, sys, time
started = time.perf_counter()
sys.path.insert(0, {root!r})
import torch
from torch._dynamo.utils import counters
from training import load_config, train
from training.report import RunClock

artifacts_in, artifacts_out, config, overrides = {args!r}
if artifacts_in:
    with open(artifacts_in, "rb") as f:
        torch.compiler.load_cache_artifacts(f.read())
first_step = {{}}
original = RunClock.first_step

def timed_first_step(self):  # the first step's wall time, device included
    inner = original(self)
    class Timed:
        def __enter__(s):
            first_step["start"] = time.perf_counter()
            return inner.__enter__()
        def __exit__(s, *exc):
            out = inner.__exit__(*exc)
            first_step["seconds"] = time.perf_counter() - first_step["start"]
            first_step["since_start"] = time.perf_counter() - started
            return out
    return Timed()

RunClock.first_step = timed_first_step
result = train(load_config(config, overrides))
if artifacts_out:
    saved = torch.compiler.save_cache_artifacts()
    if saved is not None:
        with open(artifacts_out, "wb") as f:
            f.write(saved[0])
print("RESULT " + json.dumps({{
    "split": result.time_split,
    "first_step": first_step["seconds"],
    "to_first_step": first_step["since_start"],
    "losses": result.losses,
    "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
    "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
    "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
    "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
    "dynamo_frames": counters["stats"]["unique_graphs"],
}}))
"""


def start(name, cache_dir, out_dir, config, overrides, artifacts_in="", artifacts_out=""):
    """One start in a fresh process; returns its RESULT dict."""
    runs = [f"out_dir={out_dir / name}", "train.overwrite=true", *overrides]
    code = CHILD.format(root=str(ROOT), args=(artifacts_in, artifacts_out, str(config), runs))
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{name} start failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def main() -> None:
    """Run the cold, warm and artifacts starts; print a Markdown table."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", type=Path, default=RECIPE)
    p.add_argument("--device", help="default: the recipe's")
    p.add_argument("--steps", type=int, default=4, help="training steps of each start")
    p.add_argument("--keep", type=Path, help="a cache dir to use (and keep) for cold and warm")
    p.add_argument("--set", action="append", default=[], help="another override")
    args = p.parse_args()
    overrides = [
        f"train.max_iters={args.steps}",
        f"train.lr_decay_iters={args.steps}",
        f"train.eval_interval={max(1, args.steps - 1)}",
        "train.eval_tokens=8192",
        "train.eval_train_tokens=8192",
        "train.final_full_eval=false",
        "train.log_interval=1",
        "train.compile=true",
        *args.set,
    ]
    overrides += [f"device={args.device}"] if args.device else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = args.keep or tmp / "cache"
        artifacts = tmp / "artifacts.bin"
        rows = {
            "cold": start("cold", cache, tmp, args.config, overrides, artifacts_out=str(artifacts)),
            "warm": start("warm", cache, tmp, args.config, overrides),
        }
        if artifacts.is_file():
            rows["artifacts"] = start(
                "artifacts", tmp / "empty", tmp, args.config, overrides, str(artifacts)
            )
    print(
        f"{args.config.name}, {args.steps} steps; cache dir: {'kept ' if args.keep else ''}{cache}"
    )
    print(
        "| start | to first step s | first step s | setup s | compile s | wall s "
        "| Inductor cache hits/misses | AOTAutograd hits/misses | Dynamo graphs traced "
        "| losses as cold |"
    )
    print("|---" * 10 + "|")
    for name, r in rows.items():
        s = r["split"]
        same = r["losses"] == rows["cold"]["losses"]
        print(
            f"| {name} | {r['to_first_step']:.1f} | {r['first_step']:.1f} | {s['setup']:.1f} "
            f"| {s['compile']:.1f} | {sum(s.values()):.1f} | {r['fx_hit']}/{r['fx_miss']} "
            f"| {r['aot_hit']}/{r['aot_miss']} | {r['dynamo_frames']} | {'yes' if same else 'NO'} |"
        )


if __name__ == "__main__":
    main()
