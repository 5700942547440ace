"""sample.py, evaluate.py and explore_attention.py start without the trainer: importing
them loads no module of training/, no TensorBoard and no matplotlib (the explorer
imports matplotlib only when it draws)."""

import json
import subprocess
import sys

from tests.conftest import ROOT

ENTRY_POINTS = ["sample", "evaluate", "explore_attention"]

# One fresh interpreter imports the entry points in turn and prints, after each, the
# trainer's and the plotting packages' modules loaded so far.
PROBE = """
import importlib, json, sys
heavy = ("training", "tensorboard", "matplotlib", "torch.utils.tensorboard")
loaded = {}
for name in sys.argv[1:]:
    importlib.import_module(name)
    loaded[name] = sorted(
        m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy)
    )
print(json.dumps(loaded))
"""


def test_inference_entry_points_import_no_trainer_tensorboard_or_matplotlib():
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *ENTRY_POINTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    # Each entry point's list holds what it and those before it loaded: the first
    # non-empty one names the culprit.
    assert loaded == {name: [] for name in ENTRY_POINTS}
