"""Batches: random training windows, and fixed windows that cover a split for evaluation.

Both read their windows from the split's token array, and only the (B, T + 1) batch is
converted to int64: the corpus is never copied into memory. A split that is an
``np.memmap`` of the cached token file is read with one positioned read per window
(``os.pread``) rather than through the memory map: pages of a mapped file count as this
process's resident memory once touched, and the kernel maps whole page-cache folios, so
random windows through the map make a run's resident memory grow with the corpus,
although the kernel could drop those pages at any time. Positioned reads go through the
file cache without mapping anything (docs/benchmarks.md, "Corpus size"). Any other
array is indexed directly.
"""

import mmap
import os

import numpy as np
import torch


class WindowReader:
    """Reads windows of consecutive tokens from a 1-D token array: from the file under
    an ``np.memmap`` with positioned reads (see the module docstring), else by indexing.

    Args:
        ids: (N,) token ids of one split (uint16/uint32, often an ``np.memmap``).
        length: tokens per window (block_size + 1).
    """

    def __init__(self, ids: np.ndarray, length: int):
        self.ids = ids
        self.length = length
        self.offsets = np.arange(length)
        self.file = None  # the token file's path, where windows are read from it
        # Only a memmap made for this split (its base is the map itself) knows its place
        # in the file: a slice of one keeps its parent's offset. Windows has no os.pread.
        if isinstance(ids, np.memmap) and isinstance(ids.base, mmap.mmap) and hasattr(os, "pread"):
            self.file = ids.filename
            self.first_byte = ids.offset

    def read(self, starts: np.ndarray) -> torch.Tensor:
        """(W, length) int64 tensor: row i is ids[starts[i] : starts[i] + length]."""
        if self.file is None:
            windows = self.ids[starts[:, None] + self.offsets]  # one gather, no Python loop
        else:
            item, size, first = self.ids.itemsize, self.length * self.ids.itemsize, self.first_byte
            # Opened for each batch and closed at once (microseconds against a step):
            # a reader kept open was closed only by the garbage collector, and held
            # the file (locked, on Windows) while an exception kept the run alive.
            fd = os.open(self.file, os.O_RDONLY)
            try:
                raw = b"".join(os.pread(fd, size, first + int(s) * item) for s in starts)
            finally:
                os.close(fd)
            windows = np.frombuffer(raw, dtype=self.ids.dtype).reshape(len(starts), self.length)
        return torch.from_numpy(windows.astype(np.int64))


class BatchSampler:
    """Draws random windows of block_size + 1 tokens: x is the first block_size,
    y the same window shifted by one (the next token at every position).

    The sampler has its own torch RNG, so its position can be saved and restored
    (`state_dict`) independently of dropout's RNG.

    Args:
        ids: (N,) token ids of one split, N >= block_size + 1 (an ``np.memmap`` is
            read window by window, never copied whole).
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
        self.reader = WindowReader(ids, block_size + 1)
        self.n_starts = len(ids) - block_size  # windows that fit entirely
        self.block_size = block_size
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (x, y), both (B, T) int64 on the sampler's device."""
        starts = torch.randint(self.n_starts, (self.batch_size,), generator=self.generator)
        windows = self.reader.read(starts.numpy())  # (B, T + 1)
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


class EvaluationWindows:
    """Fixed windows for a deterministic evaluation, read batch by batch.

    Without ``max_tokens`` (or when the split has no more targets than that), every
    token of the split except the first is a target exactly once: non-overlapping
    windows from the start, plus one last window aligned to the end whose
    already-counted targets are set to -1 (ignored by the loss). With ``max_tokens``,
    about that many targets from non-overlapping windows spread evenly over the split
    (a fixed sample of a large split).

    Args:
        ids: (N,) token ids, N >= block_size + 1.
        block_size: T.
        max_tokens: optional cap on the number of targets.
        id_map: optional (V,) int array, entry i the id that token i has for the model
            (a model scored on a corpus whose vocabulary is not its own); see
            `data.tokenizer.CharTokenizer.ids_in`.

    Attributes:
        starts: (W,) int64 start of each window, in order.
        covers_split: True if every target of the split is counted.
    """

    def __init__(
        self,
        ids: np.ndarray,
        block_size: int,
        max_tokens: int | None = None,
        id_map: np.ndarray | None = None,
    ):
        n, T = len(ids), block_size
        last_start = n - T - 1
        self.block_size, self.n = T, n
        self.covers_split = max_tokens is None or max_tokens >= n - 1
        self.counted_from = None  # first target position of the final window not yet counted
        if not self.covers_split:
            n_windows = max(1, min(max_tokens // T, last_start // T + 1))
            self.starts = np.linspace(0, last_start, n_windows).astype(np.int64)
        else:
            self.starts = np.arange(0, last_start + 1, T, dtype=np.int64)
            counted_from = int(self.starts[-1]) + T + 1
            if counted_from <= n - 1:
                self.starts = np.append(self.starts, last_start)
                self.counted_from = counted_from
        self.reader = WindowReader(ids, T + 1)
        self.id_map = None if id_map is None else torch.as_tensor(id_map, dtype=torch.int64)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def n_targets(self) -> int:
        """Number of counted targets (characters whose prediction is scored)."""
        if self.counted_from is None:
            return len(self.starts) * self.block_size
        return (len(self.starts) - 1) * self.block_size + self.n - self.counted_from

    def batches(self, batch_size: int, rank: int = 0, world_size: int = 1):
        """Yield (x, y), (b, T) int64 inputs and targets (y is -1 where a target is not
        counted), for windows rank, rank + world_size, ... (all of them by default),
        batch_size windows at a time."""
        mine = np.arange(rank, len(self.starts), world_size)
        for i in range(0, len(mine), batch_size):
            chosen = mine[i : i + batch_size]
            windows = self.reader.read(self.starts[chosen])
            if self.id_map is not None:
                windows = self.id_map[windows]
            x, y = windows[:, :-1], windows[:, 1:].clone()
            if self.counted_from is not None and chosen[-1] == len(self.starts) - 1:
                # The final window's targets are at positions last_start + 1 .. n - 1.
                target_pos = torch.arange(self.starts[-1] + 1, self.n)
                y[-1, target_pos < self.counted_from] = -1
            yield x, y


def evaluation_windows(
    ids: np.ndarray, block_size: int, max_tokens: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """All the windows of `EvaluationWindows` at once: (x, y), (W, T) int64 inputs and
    targets, y -1 where a target is not counted (for small splits and tests; a large
    split is read batch by batch with `EvaluationWindows.batches`)."""
    windows = EvaluationWindows(ids, block_size, max_tokens)
    return next(windows.batches(len(windows)))
