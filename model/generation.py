"""Turning logits into the next token: temperature, top-k, greedy decoding."""

import torch


def validate_sampling_args(max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    """Check sampling arguments before any model work.

    Raises:
        ValueError: naming the argument, if max_new_tokens < 0, temperature < 0
            (0 means greedy) or top_k <= 0.
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"top_k must be a positive integer (or None for off), got {top_k}")


def next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick the next token for each sequence from its last-position logits.

    Args:
        logits: (B, vocab_size) unnormalised log-probabilities.
        temperature: divides the logits; 0 means greedy (argmax).
        top_k: keep only the k most likely tokens (clamped to vocab_size); None = all.
        generator: torch RNG used for sampling, for reproducible output.

    Returns:
        (B, 1) int64 token ids.
    """
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None:
        k = min(top_k, logits.size(-1))
        kth_largest = torch.topk(logits, k, dim=-1).values[:, [-1]]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    probs = torch.softmax(logits.float(), dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)
