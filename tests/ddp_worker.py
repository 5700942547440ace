"""Run by tests/training/test_distributed.py under torchrun: one training step on each rank.

    torchrun --standalone --nproc_per_node=2 tests/ddp_worker.py OUT CORPUS [fail]
    torchrun --standalone --nproc_per_node=2 tests/ddp_worker.py OUT CORPUS accumulate
    torchrun --standalone --nproc_per_node=2 tests/ddp_worker.py OUT CORPUS all

Each rank saves the batch it drew and its weights after the step to OUT/rank{r}.pt;
"fail" makes rank 1 fail first. "accumulate" runs one float64 step of 4 micro-batches
of one window per rank on the windows in OUT/windows.pt (rank r takes windows 4r..4r+3)
and saves its loss, gradient norm and weights to OUT/accumulated{r}.pt
(see tests/training/test_loop_accumulation.py). "dropout" runs one step with model.dropout=0.5 and
saves where the embedding dropout zeroed its input, and the weights after, to
OUT/dropout{r}.pt (see tests/training/test_checkpoint_rng.py). "float16" trains 6 steps with
train.dtype=float16 from a loss scale of 2**20 (its first steps overflow) and saves the
steps skipped, the final scale, the logged losses and the weights to
OUT/float16_{r}.pt (see tests/training/test_precision.py). "all" runs the step of no mode,
"dropout", "accumulate" and "float16" one after another in one job, into OUT/grads,
OUT/dropout, OUT/accumulate (its windows.pt there) and OUT/float16: each torchrun job
starts three Python processes, which cost more than the parts themselves
(tests/training/conftest.py's ddp_job).
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import tiny_overrides  # noqa: E402
from training.config import load_config  # noqa: E402
from training.distributed import shutdown_distributed  # noqa: E402
from training.loop import Trainer  # noqa: E402


def main(out: Path, corpus: Path, fail_on_rank_1: bool, leave: bool = True) -> None:
    # Two ranks on CPU (gloo) whatever MINIGPT_TEST_DEVICE says: one GPU cannot hold both.
    cfg = load_config(None, tiny_overrides(out, corpus, device="cpu", **{"train.max_iters": 1}))
    trainer = Trainer(cfg)
    drawn = []
    next_batch = trainer.sampler.next_batch

    def recording_next_batch():
        batch = next_batch()
        drawn.append(batch)
        return batch

    trainer.sampler.next_batch = recording_next_batch
    if fail_on_rank_1 and trainer.dist.rank == 1:
        print("rank 1 failed on purpose", file=sys.stderr, flush=True)  # as train.py reports
        raise SystemExit(2)
    initial = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    _, _, lr = trainer.train_step(0)
    if fail_on_rank_1:
        trainer.report.check_finite()  # a collective: rank 0 would wait here
    torch.save(
        {
            "x": drawn[0][0],
            "y": drawn[0][1],
            "lr": lr,
            "initial": initial,
            "after": trainer.model.state_dict(),
        },
        out / f"rank{trainer.dist.rank}.pt",
    )
    trainer.close()
    del trainer
    if leave:
        shutdown_distributed()


def accumulate(out: Path, corpus: Path, leave: bool = True) -> None:
    from tests.training.accumulation import float64_trainer, step_on

    torch.set_default_dtype(torch.float64)
    windows = torch.load(out / "windows.pt", weights_only=True)
    trainer = float64_trainer(out, corpus, accumulation=4, batch=1)
    rank = trainer.dist.rank
    x, y = windows["x"][4 * rank : 4 * rank + 4], windows["y"][4 * rank : 4 * rank + 4]
    torch.save(step_on(trainer, x, y, batch=1), out / f"accumulated{rank}.pt")
    trainer.close()
    del trainer
    if leave:
        shutdown_distributed()


def dropout(out: Path, corpus: Path, leave: bool = True) -> None:
    overrides = {"train.max_iters": 1, "model.dropout": 0.5}
    trainer = Trainer(load_config(None, tiny_overrides(out, corpus, device="cpu", **overrides)))
    zeros = []
    trainer.model.dropout.register_forward_hook(lambda _m, _i, output: zeros.append(output == 0))
    trainer.train_step(0)
    after = trainer.model.state_dict()
    torch.save({"zeros": zeros[0], "after": after}, out / f"dropout{trainer.dist.rank}.pt")
    trainer.close()
    del trainer
    if leave:
        shutdown_distributed()


def float16(out: Path, corpus: Path, leave: bool = True) -> None:
    import training.precision
    from tests.training.test_precision import PLANTED_SCALE

    training.precision.INITIAL_LOSS_SCALE = PLANTED_SCALE
    overrides = {
        "train.max_iters": 6,
        "train.eval_interval": 6,
        "train.dtype": "float16",
        "data.val_fraction": 0.01,
        "train.sample_tokens": 0,
        "train.attention_prompt": "''",
    }
    trainer = Trainer(load_config(None, tiny_overrides(out, corpus, device="cpu", **overrides)))
    result = trainer.run()  # closes the trainer
    state = {
        "skipped": result.skipped_steps,
        "scale": trainer.scaler.get_scale(),
        "losses": result.losses,
        "weights": trainer.model.state_dict(),
    }
    torch.save(state, out / f"float16_{trainer.dist.rank}.pt")
    del trainer
    if leave:
        shutdown_distributed()


def all_parts(out: Path, corpus: Path) -> None:
    """Every mode but "fail", one after another, each in its own folder of ``out``, in
    one process group (joining it again after leaving it hangs), left at the end."""
    for part in ("grads", "dropout", "accumulate", "float16"):
        (out / part).mkdir(exist_ok=True)
    main(out / "grads", corpus, fail_on_rank_1=False, leave=False)
    dropout(out / "dropout", corpus, leave=False)
    accumulate(out / "accumulate", corpus, leave=False)
    torch.set_default_dtype(torch.float32)  # accumulate's float64
    float16(out / "float16", corpus, leave=False)
    shutdown_distributed()


if __name__ == "__main__":
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    if mode == "all":
        all_parts(Path(sys.argv[1]), Path(sys.argv[2]))
    elif mode == "accumulate":
        accumulate(Path(sys.argv[1]), Path(sys.argv[2]))
    elif mode == "dropout":
        dropout(Path(sys.argv[1]), Path(sys.argv[2]))
    elif mode == "float16":
        float16(Path(sys.argv[1]), Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]), mode == "fail")
