"""Random number generators: seeding them all, and saving and restoring their states
(in checkpoints, so that a resumed run draws the same numbers as an uninterrupted one).
"""

import random

import numpy as np
import torch

# A prime above any number of ranks: rank r's dropout seed is seed + r x this (mod 2**32).
RANK_SEED_STRIDE = 1_000_003


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global RNGs (torch seeds CUDA too)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def seed_rank_stream(seed: int, rank: int) -> None:
    """Give data-parallel rank ``rank`` its own torch RNG stream (dropout's masks), once
    the weights are drawn: ranks then start from the same weights but drop different
    units, as one process with their whole batch would. Rank 0 keeps the stream of a
    single-process run (same losses); rank r > 0 is seeded with (seed + r x
    RANK_SEED_STRIDE) mod 2**32 (torch's CPU generator keeps 32 bits of a seed), a
    value no rank's batch sampler (seed + r) is seeded with.
    """
    if rank:
        torch.manual_seed((seed + rank * RANK_SEED_STRIDE) % 2**32)  # CUDA's generators too


def capture_rng_state(device: torch.device) -> dict:
    """Every global RNG state (python, numpy, torch CPU, and CUDA when training on it),
    as checkpoint-safe values."""
    np_state = np.random.get_state(legacy=False)
    state = {
        "python": random.getstate(),
        "numpy": {
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": np_state["state"]["pos"],
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        },
        "torch": torch.get_rng_state(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict, device: torch.device) -> None:
    """Restore states saved by `capture_rng_state` (CUDA ones only when on CUDA)."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": "MT19937",
            "state": {"key": np_state["key"].numpy().astype(np.uint32), "pos": np_state["pos"]},
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
