"""Batches: random training windows, and fixed windows that cover a split for evaluation."""

import numpy as np
import torch


class BatchSampler:
    """Draws random windows of block_size + 1 tokens: x is the first block_size,
    y the same window shifted by one (the next token at every position).

    The sampler has its own torch RNG, so its position can be saved and restored
    (`state_dict`) independently of dropout's RNG.

    Args:
        ids: (N,) token ids of one split, N >= block_size + 1.
        block_size: T, tokens per example.
        batch_size: B, examples per batch.
        seed: seeds the sampler's RNG.
        device: where batches are placed.

    Raises:
        ValueError: if the split is shorter than block_size + 1 tokens.
    """

    def __init__(self, ids: np.ndarray, block_size: int, batch_size: int, seed: int, device):
        if len(ids) < block_size + 1:
            raise ValueError(f"split of {len(ids)} tokens is shorter than block_size + 1")
        self.data = torch.from_numpy(ids.astype(np.int64))
        self.block_size = block_size
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        self._offsets = torch.arange(block_size + 1)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (x, y), both (B, T) int64 on the sampler's device."""
        n_starts = len(self.data) - self.block_size  # windows that fit entirely
        starts = torch.randint(n_starts, (self.batch_size,), generator=self.generator)
        windows = self.data[starts[:, None] + self._offsets]  # (B, T + 1), no Python loop
        if self.device.type == "cuda":
            windows = windows.pin_memory().to(self.device, non_blocking=True)
        else:
            windows = windows.to(self.device)
        return windows[:, :-1], windows[:, 1:]

    def state_dict(self) -> dict:
        """The RNG position, as a uint8 tensor under "generator"."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore a position saved by `state_dict`."""
        self.generator.set_state(state["generator"])


def evaluation_windows(
    ids: np.ndarray, block_size: int, max_tokens: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed windows for a deterministic evaluation.

    Without ``max_tokens``, every token of the split except the first is a target
    exactly once: non-overlapping windows from the start, plus one last window
    aligned to the end whose already-counted targets are set to -1 (ignored by the
    loss). With ``max_tokens``, about that many targets from windows spread evenly
    over the split (a fixed sample of a large split).

    Args:
        ids: (N,) token ids, N >= block_size + 1.
        block_size: T.
        max_tokens: optional cap on the number of targets.

    Returns:
        (x, y): (W, T) int64 inputs and targets; y is -1 where a target is not counted.
    """
    data = torch.from_numpy(ids.astype(np.int64))
    n, T = len(data), block_size
    last_start = n - T - 1
    if max_tokens is not None and max_tokens < n - 1:
        n_windows = max(1, min(max_tokens // T, last_start // T + 1))
        starts = torch.linspace(0, last_start, n_windows).long()
        counted_from = None
    else:
        starts = torch.arange(0, last_start + 1, T)
        counted_from = int(starts[-1]) + T + 1  # first target not yet covered
        if counted_from <= n - 1:
            starts = torch.cat([starts, torch.tensor([last_start])])
    windows = data[starts[:, None] + torch.arange(T + 1)]
    x, y = windows[:, :-1], windows[:, 1:].clone()
    if counted_from is not None and counted_from <= n - 1:
        # Target positions in the final window are last_start+1 .. n-1.
        target_pos = torch.arange(last_start + 1, n)
        y[-1, target_pos < counted_from] = -1
    return x, y
