"""The optimizer step's share of a training step: Muon one matrix at a time
(torch.optim.Muon) against Muon batched by shape (training.optim.BatchedMuon), and
AdamW for scale.

    python bench/optimizer_share.py                          # the CPU recipe, on CPU
    python bench/optimizer_share.py --config configs/shakespeare_char_modern.yaml --device cuda
    python bench/optimizer_share.py --steps 10 --rounds 5    # longer, steadier figures

One `training.loop.Trainer` runs the real training step (forward, backward, gradient
clipping, optimizer step; eager, so that no compile time enters) on the real corpus.
The variants take turns on the same model: each round runs every variant for
``--steps`` steps, so a machine that slows down for a while slows all of them. The
optimizer step is timed on its own (waiting for the device before and after it on
CUDA); the table gives medians over the rounds of the per-step means.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus  # noqa: E402
from training.config import load_config  # noqa: E402
from training.loop import Trainer  # noqa: E402
from training.optim import MultiOptimizer, build_optimizer  # noqa: E402
from training.report import device_sync  # noqa: E402

CORPUS = ROOT / DEFAULT_CORPUS_PATH
RECIPE = ROOT / "configs" / "shakespeare_char_cpu.yaml"


def muon_variant(trainer: Trainer, batched: bool) -> MultiOptimizer:
    """The run's Muon + AdamW optimizer, with its Muon part one matrix at a time
    (torch.optim.Muon) or batched (BatchedMuon), on the same parameter groups."""
    cfg = trainer.cfg.train
    built = build_optimizer(trainer.model, cfg, trainer.device.type)
    if not batched:
        muon = built.optimizers[0]
        plain = torch.optim.Muon(muon.param_groups, **muon.defaults)
        built = MultiOptimizer([plain, built.optimizers[1]])
    return built


class TimedStep:
    """Wraps an optimizer's ``step``, adding up its seconds (device work included)."""

    def __init__(self, optimizer, sync):
        self.optimizer, self.sync, self.seconds = optimizer, sync, 0.0
        self.param_groups = optimizer.param_groups

    def step(self) -> None:
        self.sync()
        started = time.perf_counter()
        self.optimizer.step()
        self.sync()
        self.seconds += time.perf_counter() - started

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)


def main() -> None:
    """Parse arguments, run the variants in turn, print a Markdown table."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", type=Path, default=RECIPE, help="a recipe that uses Muon")
    p.add_argument("--device", help="cpu, cuda, ... (default: the recipe's)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of all variants")
    p.add_argument("--set", action="append", default=[], help="another override")
    args = p.parse_args()
    ensure_default_corpus(CORPUS)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"data.path={CORPUS}", f"out_dir={tmp}/run", f"data.cache_dir={tmp}/cache"]
        overrides += ["train.compile=false", *args.set]
        overrides += [f"device={args.device}"] if args.device else []
        trainer = Trainer(load_config(args.config, overrides))
        trainer.model.train()
        sync = device_sync(trainer.device)
        variants = {
            "Muon, one matrix at a time": muon_variant(trainer, batched=False),
            "Muon, batched by shape": muon_variant(trainer, batched=True),
            "AdamW": build_optimizer(
                trainer.model,
                load_config(args.config, [*overrides, "train.optimizer=adamw"]).train,
                trainer.device.type,
            ),
        }
        times = {name: {"step": [], "optimizer": []} for name in variants}
        step = 0
        for round_index in range(args.rounds + 1):  # round 0 warms up, untimed
            for name, optimizer in variants.items():
                timed = TimedStep(optimizer, sync)
                trainer.optimizer = timed
                sync()
                started = time.perf_counter()
                for _ in range(args.steps):
                    trainer.train_step(step)
                    step += 1
                sync()
                if round_index:
                    times[name]["step"].append((time.perf_counter() - started) / args.steps)
                    times[name]["optimizer"].append(timed.seconds / args.steps)
        muon_shapes = {
            tuple(p.shape) for p in variants["Muon, batched by shape"].param_groups[0]["params"]
        }
        n_muon = len(variants["Muon, batched by shape"].param_groups[0]["params"])
    m, t = trainer.cfg.model, trainer.cfg.train
    print(
        f"torch {torch.__version__}, {trainer.device}, {torch.get_num_threads()} threads; "
        f"{m.n_layer} layers, {m.n_embd} wide, batch {t.batch_size} x {m.block_size}; "
        f"{n_muon} Muon matrices in {len(muon_shapes)} shapes; "
        f"{args.rounds} rounds of {args.steps} steps, medians"
    )
    print("| optimizer | training step ms | optimizer step ms | optimizer share |")
    print("|---|---|---|---|")
    for name, measured in times.items():
        step_ms = 1000 * statistics.median(measured["step"])
        opt_ms = 1000 * statistics.median(measured["optimizer"])
        print(f"| {name} | {step_ms:.1f} | {opt_ms:.1f} | {100 * opt_ms / step_ms:.0f}% |")


if __name__ == "__main__":
    main()
