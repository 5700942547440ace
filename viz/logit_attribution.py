"""What each part of the model pushes: direct logit attribution (Elhage et al. 2021, "A
Mathematical Framework for Transformer Circuits", section on the residual stream).

The last block's output, the residual stream the final norm reads, is a sum of what
every part wrote into it at that character:

    x = embedding + Σ_layers ( Σ_heads head write + out_proj bias + MLP write )

a head's write being its weights·V times its d_k columns of W_o. The logit of a
character c is w_c · final_norm(x) (w_c: c's row of the LM head). The final norm
divides x by its spread (LayerNorm: the standard deviation after subtracting the
mean; RMSNorm: the root mean square). Held at this character's divisor D (the
"frozen norm"), it is linear, and each part's push is

    push(part) = w_c · (gain ⊙ (part − mean(part)) / D)      (RMSNorm: no mean)

so the pushes plus the norm's bias term add up to the logit exactly (before the soft
cap, when the model has one). The approximation is in reading one push alone: taking
a part away would change D too, so a push is not exactly what removing the part
changes; the what-if switches (viz/attention_steps.py BLOCK_SWITCHES) show that.

Every part is a tensor `record_forward` kept (the heads' weights·V, the MLP's output,
the first block's input) times the model's own weights; nothing of the forward pass
is run again.

    record = record_forward(model, ids)
    pushes = logit_attribution(model, record)      # the last character's prediction
"""

import torch

from model import GPT
from viz.attention_steps import ForwardRecord
from viz.messages import Message, message_json

# What the frozen norm means, in words (viz/page/messages.json).
FROZEN_NORM = Message("attribution.note")


@torch.no_grad()
def head_writes(model: GPT, record: ForwardRecord, layer: int) -> torch.Tensor:
    """What each head of ``layer`` writes into the residual stream: (n_head, T, C), head
    h's weights·V (T, d_k) times its d_k columns of W_o (out_proj). Their sum plus
    out_proj's bias is the attention's output."""
    config = model.config
    d_k = config.head_size
    out = record.layers[layer]["out"][0]  # (n_head, T, d_k)
    w_o = model.blocks[layer].attn.out_proj.weight  # (C, C): input columns h·d_k ..
    return torch.stack(
        [out[h] @ w_o[:, h * d_k : (h + 1) * d_k].T for h in range(config.n_head)]
    ).detach()


def residual_parts(model: GPT, record: ForwardRecord, position: int) -> list[dict]:
    """The parts whose sum is the final norm's input at ``position``, in the order they
    are written: ``{"kind": "embedding" | "head" | "attention_bias" | "mlp", "layer":
    int or None, "head": int or None, "vector": (C,) float64}``."""
    parts = [
        {
            "kind": "embedding",
            "layer": None,
            "head": None,
            "vector": record.layers[0]["residual_in"][0, position].double().cpu(),
        }
    ]
    for layer, kept in enumerate(record.layers):
        for head, write in enumerate(head_writes(model, record, layer)[:, position]):
            parts.append({"kind": "head", "layer": layer, "head": head, "vector": write})
        bias = model.blocks[layer].attn.out_proj.bias
        if bias is not None:
            parts.append({"kind": "attention_bias", "layer": layer, "head": None, "vector": bias})
        parts.append(
            {"kind": "mlp", "layer": layer, "head": None, "vector": kept["mlp"][0, position]}
        )
    for part in parts:
        part["vector"] = part["vector"].detach().double().cpu()
    return parts


def frozen_norm(model: GPT, x: torch.Tensor) -> tuple[float, bool]:
    """The final norm's divisor D for the (C,) residual stream ``x`` and whether it
    subtracts the mean (LayerNorm) or not (RMSNorm): ln_f(x) = gain ⊙ (x − mean) / D
    + bias, with the module's own eps."""
    norm = model.ln_f
    x = x.detach().double()
    if isinstance(norm, torch.nn.LayerNorm):
        return float((x.var(unbiased=False) + norm.eps).sqrt()), True
    eps = norm.eps if norm.eps is not None else torch.finfo(model.ln_f.weight.dtype).eps
    return float((x.square().mean() + eps).sqrt()), False


@torch.no_grad()
def logit_attribution(
    model: GPT, record: ForwardRecord, position: int = -1, token: int | None = None
) -> dict:
    """How much each part raises (> 0) or lowers (< 0) one logit at one character.

    Args:
        model, record: the model and its `record_forward` pass.
        position: the character, 0..T-1 (negative counts from the end; default the
            last: the prediction of the next character).
        token: the vocabulary id whose logit is explained; None: the one the model
            ranks first there.

    Returns:
        ``{"position", "token", "norm" ("LayerNorm" or "RMSNorm"), "divisor" D,
        "parts": [{"kind", "layer", "head", "push"}] in `residual_parts`' order,
        "norm_bias" (the norm's bias term w_c · bias, 0 without one), "total" (Σ
        pushes + norm_bias, float64), "logit" (the model's LM-head output before any
        soft cap), "capped" (the model's logit after the soft cap, or None without
        one), "note": FROZEN_NORM as message JSON}``. total equals logit up to float32 rounding.

    Raises:
        ValueError: for a position or token out of range.
    """
    T, vocab_size = record.logits.shape[1:]
    if not -T <= position < T:
        raise ValueError(f"position must be in 0..{T - 1}, got {position}")
    position %= T
    if token is None:
        token = int(record.logits[0, position].argmax())
    if not 0 <= token < vocab_size:
        raise ValueError(f"token must be in 0..{vocab_size - 1}, got {token}")
    divisor, centred = frozen_norm(model, record.final["residual"][0, position])
    norm = model.ln_f
    direction = (
        model.lm_head.weight[token].detach().double().cpu() * norm.weight.detach().double().cpu()
    )
    parts = []
    for part in residual_parts(model, record, position):
        vector = part.pop("vector")
        if centred:
            vector = vector - vector.mean()
        parts.append({**part, "push": float(direction @ vector) / divisor})
    bias = getattr(norm, "bias", None)
    norm_bias = 0.0
    if bias is not None:
        norm_bias = float(
            model.lm_head.weight[token].detach().double().cpu() @ bias.detach().double().cpu()
        )
    capped = None
    if model.config.logit_softcap > 0:
        capped = float(record.logits[0, position, token])
    return {
        "position": position,
        "token": token,
        "norm": "LayerNorm" if centred else "RMSNorm",
        "divisor": divisor,
        "parts": parts,
        "norm_bias": norm_bias,
        "total": sum(p["push"] for p in parts) + norm_bias,
        "logit": float(record.final["head_logits"][0, position, token]),
        "capped": capped,
        "note": message_json(FROZEN_NORM),
    }
