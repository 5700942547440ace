"""Run by tests/test_distributed.py under torchrun: one training step on each rank.

    torchrun --standalone --nproc_per_node=2 tests/ddp_worker.py OUT CORPUS [fail-on-rank-1]

Each rank saves the batch it drew and its weights after the step to OUT/rank{r}.pt.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import tiny_overrides  # noqa: E402
from training.config import load_config  # noqa: E402
from training.distributed import shutdown_distributed  # noqa: E402
from training.loop import Trainer  # noqa: E402


def main(out: Path, corpus: Path, fail_on_rank_1: bool) -> None:
    cfg = load_config(None, tiny_overrides(out, corpus, **{"train.max_iters": 1}))
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
        trainer.check_finite()  # a collective: rank 0 would wait here for rank 1 forever
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
    shutdown_distributed()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), len(sys.argv) > 3)
