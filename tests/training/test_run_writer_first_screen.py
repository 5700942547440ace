"""TensorBoard opens on TIME SERIES, not on the losses: the line a run prints names the
address whose #scalars opens the SCALARS tab, where loss/train and loss/val come first
(TensorBoard 2.21 in Chromium, 5 December 2026: the tab shown is SCALARS, its first
section "loss")."""

from tests.conftest import tiny_overrides
from training.config import load_config
from training.run_writer import tensorboard_line


def test_the_run_names_the_address_of_the_losses(tmp_path):
    cfg = load_config(None, tiny_overrides(tmp_path, tmp_path / "input.txt"))
    assert tensorboard_line(cfg) == (
        "TensorBoard, with every evaluation's sample and heatmaps: tensorboard --logdir "
        f"{tmp_path} --samples_per_plugin images=1000,text=1000; "
        "open http://localhost:6006/#scalars for the losses first"
    )
