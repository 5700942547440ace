"""A trained model's attention weights for one prompt, and picking one head from them.

The weights come from the model's own explicit attention path
(`model.gpt.explicit_attention`, asked for by `model.record_attention`), so they are
exactly the softmax rows the model mixes values with.
"""

import torch

from model import GPT, record_attention


def prompt_attention(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """Attention weights of every layer and head for one prompt.

    Runs in eval mode (no dropout) and restores the model's previous mode.

    Args:
        model: a GPT.
        ids: (T,) int64 token ids of the prompt, 1 <= T <= block_size.

    Returns:
        (n_layer, n_head, T, T) float32 CPU tensor; entry [l, h, i, j] is how much
        character i attends to character j in head h of layer l. Each row sums to 1;
        entries above the diagonal (the future) are 0.

    Raises:
        ValueError: if ids is not 1-D, is empty, or is longer than block_size.
    """
    return attention_and_next_logits(model, ids)[0]


@torch.no_grad()
def attention_and_next_logits(model: GPT, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass over a prompt: every layer's attention weights, and the logits
    of the character that would come next.

    Runs in eval mode (no dropout) and restores the model's previous mode.

    Args:
        model: a GPT.
        ids: (T,) int64 token ids of the prompt, 1 <= T <= block_size.

    Returns:
        ``(weights, logits)``: weights as in `prompt_attention`, (n_layer, n_head, T, T)
        float32 on the CPU; logits (vocab_size,) float32 on the CPU, the last
        position's unnormalised log-probabilities of the next character.

    Raises:
        ValueError: if ids is not 1-D, is empty, or is longer than block_size.
    """
    if ids.dim() != 1 or ids.numel() == 0:
        raise ValueError(f"ids must be a non-empty 1-D tensor, got shape {tuple(ids.shape)}")
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        with record_attention(model) as weights:
            logits, _ = model(ids.to(device).unsqueeze(0))
    finally:
        model.train(was_training)
    # Each layer gives (1, n_head, T, T); stack the layers, drop the batch dimension.
    return torch.stack([w[0] for w in weights]).float().cpu(), logits[0, -1].float().cpu()


def select_head(weights: torch.Tensor, layer: int, head: int | None = None) -> torch.Tensor:
    """One layer's weights for one head, or averaged over its heads.

    The average of rows that each sum to 1 also sums to 1, and stays 0 above the
    diagonal, so it reads like a single head.

    Args:
        weights: (n_layer, n_head, T, T) from `prompt_attention`.
        layer: 0-based layer index; negative counts from the end (-1: last layer).
        head: 0-based head index, or None for the mean over heads.

    Returns:
        (T, T) tensor.

    Raises:
        ValueError: if layer or head is out of range.
    """
    n_layer, n_head = weights.shape[:2]
    if not -n_layer <= layer < n_layer:
        raise ValueError(f"layer must be in 0..{n_layer - 1} (or -1 for the last), got {layer}")
    if head is not None and not 0 <= head < n_head:
        raise ValueError(f"head must be in 0..{n_head - 1}, got {head}")
    per_head = weights[layer]
    return per_head.mean(dim=0) if head is None else per_head[head]
