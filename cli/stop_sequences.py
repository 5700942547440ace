"""Stop strings for sample.py: the matcher that ends each sample of a batch at the first
stop sequence it generates (the escapes --stop understands are `data.escapes`)."""

from collections.abc import Sequence


class StopSequences:
    """Ends each sequence of a batch at the first stop sequence it generates, and says
    which generated tokens are safe to show so far (for streaming).

    Matching runs on token ids of the generated text only (not the prompt). The stop
    sequence itself is not part of the output. When several stop sequences end at the
    same token, the longest one is removed. Tokens that could still be the start of a
    stop sequence are held back until they can no longer be; `flush` releases them when
    generation ends without a match.

    Args:
        stops: stop sequences, each a non-empty sequence of token ids.
        batch_size: B, the number of sequences generated together.

    Raises:
        ValueError: if a stop sequence is empty or batch_size < 1.
    """

    def __init__(self, stops: Sequence[Sequence[int]], batch_size: int):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if any(len(s) == 0 for s in stops):
            raise ValueError("a stop sequence must hold at least one token")
        # Longest first, so that the longest of several simultaneous matches wins.
        self.stops = sorted({tuple(int(t) for t in s) for s in stops}, key=len, reverse=True)
        # A held-back tail is a proper prefix of a stop sequence, so at most this long.
        self._max_hold = len(self.stops[0]) - 1 if self.stops else 0
        self.finished = [False] * batch_size
        self._pending: list[list[int]] = [[] for _ in range(batch_size)]

    @property
    def all_finished(self) -> bool:
        """True once every sequence has produced a stop sequence."""
        return all(self.finished)

    def push(self, tokens: Sequence[int]) -> list[list[int]]:
        """Take one new token per sequence; return, per sequence, the tokens that can be
        shown now (possibly none). Tokens of finished sequences are ignored.

        Args:
            tokens: B token ids, one per sequence (e.g. ``step[:, 0].tolist()`` of a
                (B, 1) step).

        Raises:
            ValueError: if the number of tokens is not the batch size.
        """
        if len(tokens) != len(self.finished):
            raise ValueError(f"expected {len(self.finished)} tokens, got {len(tokens)}")
        released = []
        for row, token in enumerate(tokens):
            if self.finished[row]:
                released.append([])
                continue
            pending = self._pending[row]
            pending.append(int(token))
            released.append(self._release(row, pending))
        return released

    def flush(self) -> list[list[int]]:
        """Release the held-back tokens of every unfinished sequence (generation ended
        without a stop sequence completing)."""
        released = [list(p) for p in self._pending]
        for p in self._pending:
            p.clear()
        return released

    def _release(self, row: int, pending: list[int]) -> list[int]:
        """Finish ``row`` if ``pending`` ends with a stop sequence; otherwise keep only
        its longest tail that a stop sequence could still begin with."""
        for stop in self.stops:
            if len(pending) >= len(stop) and tuple(pending[-len(stop) :]) == stop:
                self.finished[row] = True
                out = pending[: -len(stop)]
                pending.clear()
                return out
        hold = 0
        # Any future match must start inside the longest tail that is a proper prefix
        # of some stop sequence; everything before that tail can be shown.
        for n in range(min(len(pending), self._max_hold), 0, -1):
            tail = tuple(pending[-n:])
            if any(len(s) > n and s[:n] == tail for s in self.stops):
                hold = n
                break
        out = pending[: len(pending) - hold]
        del pending[: len(pending) - hold]
        return out
