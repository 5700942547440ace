"""KV cache: the keys and values of positions already seen, kept between decode steps.

Autoregressive decoding without a cache recomputes every position's keys and values for
each new token, although they never change (attention is causal: position t does not
depend on later positions). A KV cache stores them once; each step then runs the model
on the new token only and attends over the stored keys and values
(Pope et al. 2022, "Efficiently Scaling Transformer Inference", section 2).

    prefill:  model(prompt, cache=cache)   writes positions 0..T-1, returns their logits
    decode:   model(token, cache=cache)    writes position cache.length, one per step

The buffers are allocated once, at their full size (block_size positions), so a step
writes one slice in place and reads a view: nothing is re-concatenated per step.

A rolling cache (``rolling=True``, for RoPE models) goes on past block_size: each new
position overwrites the oldest, so the cache always holds the last block_size
positions. That is valid only where a key's position enters its attention score as a
distance to the query (rotary embeddings): a kept key's rotation stays right as the
window moves. Slot order does not matter, since attention sums over the keys.
"""

import torch


class KVCache:
    """Preallocated keys and values of every layer for a batch of sequences.

    ``length`` counts the positions seen; slots 0 .. min(length, max_length) - 1 of every
    layer hold valid entries. During one model forward each layer calls `update` with
    its new keys and values (all layers write the same positions); the model then calls
    `advance` once. For inference only (under ``torch.no_grad()`` or
    ``torch.inference_mode()``).

    Args:
        n_layer: number of transformer blocks.
        batch_size: B, sequences decoded together.
        n_head: attention heads per layer.
        max_length: positions the cache can hold (the model's block_size).
        head_size: d_k, channels per head.
        dtype, device: those of the model's activations.
        rolling: past max_length, one new position at a time overwrites the oldest
            (see the module docstring); otherwise max_length is the limit.

    Raises:
        ValueError: if a size is not positive.
    """

    def __init__(
        self,
        n_layer: int,
        batch_size: int,
        n_head: int,
        max_length: int,
        head_size: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        rolling: bool = False,
    ):
        sizes = dict(n_layer=n_layer, batch_size=batch_size, n_head=n_head)
        sizes.update(max_length=max_length, head_size=head_size)
        for name, value in sizes.items():
            if value <= 0:
                raise ValueError(f"KVCache {name} must be positive, got {value}")
        self.max_length = max_length
        self.rolling = rolling
        self.length = 0
        shape = (n_layer, batch_size, n_head, max_length, head_size)
        # Zeros rather than empty: unwritten positions are never read, but a bug that
        # reads them then gives a visible wrong answer instead of arbitrary memory.
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        # Per-layer views, made once, so a decode step does not index the layer axis.
        # Indexing, not unbind(): autograd forbids in-place writes to unbind's views.
        self._layer_keys = [self.keys[i] for i in range(n_layer)]
        self._layer_values = [self.values[i] for i in range(n_layer)]

    @classmethod
    def for_model(cls, model: torch.nn.Module, batch_size: int) -> "KVCache":
        """An empty cache sized for ``model`` (a GPT) and ``batch_size`` sequences, on the
        device and in the dtype of the model's weights, holding block_size positions;
        rolling for a RoPE model."""
        config = model.config
        weight = model.token_embedding.weight
        return cls(
            config.n_layer,
            batch_size,
            config.n_head,
            config.block_size,
            config.n_embd // config.n_head,
            dtype=weight.dtype,
            device=weight.device,
            rolling=config.position == "rope",
        )

    def fits(self, n: int) -> bool:
        """Whether ``n`` new positions can be added: within max_length, or one at a
        time in a rolling cache."""
        return self.length + n <= self.max_length or (self.rolling and n == 1)

    @property
    def batch_size(self) -> int:
        """B, the number of sequences the cache holds."""
        return self.keys.size(1)

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store one layer's new keys and values after the cached ones; return all of them.

        Args:
            layer: index of the transformer block, 0 .. n_layer - 1.
            k, v: (B, n_head, T, d_k) keys and values of the T new positions.

        Returns:
            keys, values: (B, n_head, min(length + T, max_length), d_k) views of the
            buffers holding the cached positions and the new ones (in a full rolling
            cache, in slot order, not position order). ``length`` is unchanged until
            `advance` is called.

        Raises:
            ValueError: if the T new positions do not fit (see `fits`) or the batch
                size differs from the cache's.
            RuntimeError: if autograd is recording (the cache is for inference only:
                in-place writes into shared buffers cannot carry gradients).
        """
        if torch.is_grad_enabled():
            raise RuntimeError(
                "the KV cache is for inference: run under torch.no_grad() or torch.inference_mode()"
            )
        T = k.size(2)
        if not self.fits(T):
            raise ValueError(
                f"KV cache holds {self.length} of {self.max_length} positions; "
                f"{T} more do not fit (block_size is the limit)"
            )
        if k.size(0) != self.batch_size:
            raise ValueError(f"KV cache was made for batch size {self.batch_size}, got {k.size(0)}")
        keys, values = self._layer_keys[layer], self._layer_values[layer]
        start = self.length % self.max_length  # past max_length: the oldest slot (T = 1)
        keys[:, :, start : start + T] = k
        values[:, :, start : start + T] = v
        end = min(self.length + T, self.max_length)
        return keys[:, :, :end], values[:, :, :end]

    def advance(self, n: int) -> None:
        """Mark ``n`` more positions as valid, after every layer has called `update`."""
        self.length += n

    def reset(self) -> None:
        """Forget every position (the buffers are kept and overwritten by the next prefill)."""
        self.length = 0
