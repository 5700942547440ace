"""AdamW with explicit parameter groups: weight decay on 2-D weight matrices only."""

import torch
from torch import nn

from training.config import TrainConfig


def parameter_groups(model: nn.Module) -> list[dict]:
    """Split the model's parameters into a decayed and a non-decayed group.

    Decayed: 2-D weight matrices of Linear layers (attention and MLP projections).
    Not decayed: biases, LayerNorm gains, and embeddings (the token embedding is
    also the tied LM head). Tied parameters appear once.

    Returns:
        ``[{"params": [...], "weight_decay": None, "names": [...]}, ...]`` with the
        decayed group first; "weight_decay" is filled in by `build_optimizer`.

    Raises:
        RuntimeError: if a trainable parameter lands in no group or in two.
    """
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay, no_decay = [], []
    for name, param in model.named_parameters():  # tied parameters are listed once
        if not param.requires_grad:
            continue
        is_matrix = param.dim() >= 2 and id(param) not in embeddings
        (decay if is_matrix else no_decay).append((name, param))
    groups = [
        {"params": [p for _, p in g], "names": [n for n, _ in g], "weight_decay": None}
        for g in (decay, no_decay)
    ]
    grouped = [id(p) for g in groups for p in g["params"]]
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    if len(grouped) != len(set(grouped)) or set(grouped) != trainable:
        raise RuntimeError("every trainable parameter must be in exactly one optimizer group")
    return groups


def build_optimizer(model: nn.Module, cfg: TrainConfig, device_type: str) -> torch.optim.AdamW:
    """AdamW (Loshchilov & Hutter 2019) over `parameter_groups`; fused kernels on CUDA,
    multi-tensor (foreach) steps elsewhere."""
    groups = parameter_groups(model)
    groups[0]["weight_decay"] = cfg.weight_decay
    groups[1]["weight_decay"] = 0.0
    for g in groups:
        del g["names"]
    fast = {"fused": True} if device_type == "cuda" else {"foreach": True}
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2), **fast)
