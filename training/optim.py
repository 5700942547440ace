"""Optimizers with explicit parameter groups, and the weight average after each step.

- ``adamw``: AdamW (Loshchilov & Hutter 2019) for everything; weight decay on the 2-D
  weight matrices only.
- ``muon``: Muon (Jordan et al. 2024) for the 2-D hidden weight matrices inside the
  transformer blocks, AdamW for embeddings, the LM head, norms and biases, which Muon
  is not meant for. `BatchedMuon` is torch.optim.Muon with its Newton-Schulz
  iterations run once per matrix shape on the stacked matrices (as modded-nanogpt
  does), instead of once per matrix.

Every trainable parameter lands in exactly one group; this is checked.

Weight averaging (`WeightAverage`): an exponential moving average of the weights over
the last steps. With a learning rate that ends above zero, the last iterates still jump
around the minimum they are near; the average of the last few hundred sits closer to
it, and its validation loss is lower (Polyak & Juditsky 1992; the exponential form as
in Izmailov et al. 2018, "Averaging Weights Leads to Wider Optima"). With
``train.ema_decay`` > 0:

    average = weights after step ema_start + 1
    average = decay_t * average + (1 - decay_t) * weights  after every later step

where decay_t is ``decay`` for a chosen start (ema_start > 0). Averaging from the
first step (ema_start 0) warms the decay up as timm's ModelEmaV2 and nanochat do,
decay_t = min(decay, (1 + t) / (10 + t)) at the t-th fold (t = 1, 2, ...): with a
fixed 0.999 the average of a 200-step run would still be 82% the first step's
(nearly random) weights; warmed up, their share after 200 steps is below 1e-14.
A run whose chosen start leaves too few steps for its decay says so at the start
(`training.schedule.schedule_notices`).

and from its first step on, the average is what a run evaluates, logs, saves as the
model in ckpt.pt and best.pt, and samples from; the weights being trained are kept in
ckpt.pt too, so a resumed run continues them (and the average) exactly.
torch.optim.swa_utils.AveragedModel does the averaging.
"""

import math
from collections import defaultdict

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from model.device import cpu_has_bfloat16, cuda_has_bfloat16
from training.config import TrainConfig


def _check_exactly_once(model: nn.Module, groups: list[dict]) -> None:
    grouped = [id(p) for g in groups for p in g["params"]]
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    if len(grouped) != len(set(grouped)) or set(grouped) != trainable:
        raise RuntimeError("every trainable parameter must be in exactly one optimizer group")


def parameter_groups(model: nn.Module) -> list[dict]:
    """Split the model's parameters into a decayed and a non-decayed group.

    Decayed: 2-D weight matrices of Linear layers (attention and MLP projections, and
    an untied LM head). Not decayed: biases, norm gains, and embeddings (a tied
    token embedding is also the LM head). Tied parameters appear once.

    Returns:
        ``[{"params": [...], "names": [...]}, {...}]``, the decayed group first.

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
    groups = [{"params": [p for _, p in g], "names": [n for n, _ in g]} for g in (decay, no_decay)]
    _check_exactly_once(model, groups)
    return groups


def muon_parameter_groups(model: nn.Module) -> list[dict]:
    """Three groups for the Muon set-up: hidden matrices (Muon), other decayed
    matrices (AdamW with decay: an untied LM head), and the rest (AdamW, no decay).

    Hidden matrices are the 2-D weights inside the transformer blocks (``blocks.*``).

    Raises:
        RuntimeError: if a trainable parameter lands in no group or in two.
    """
    decay, no_decay = parameter_groups(model)
    hidden = [
        (n, p)
        for n, p in zip(decay["names"], decay["params"], strict=True)
        if n.startswith("blocks.")
    ]
    other = [
        (n, p)
        for n, p in zip(decay["names"], decay["params"], strict=True)
        if not n.startswith("blocks.")
    ]
    groups = [{"params": [p for _, p in g], "names": [n for n, _ in g]} for g in (hidden, other)]
    groups.append(no_decay)
    _check_exactly_once(model, groups)
    return groups


def orthogonalize(
    updates: torch.Tensor,
    coefficients: tuple[float, float, float],
    steps: int,
    eps: float,
    dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """Newton-Schulz iterations towards the nearest semi-orthogonal matrix, for a
    stack of matrices at once, in ``dtype`` (Jordan et al. 2024, "Muon").

    Each matrix X (wide: a tall one is transposed first, and back at the end) is
    divided by its Frobenius norm, so its singular values are at most 1, then
    ``steps`` times X <- a X + (b A + c A A) X with A = X X^T, the quintic whose
    coefficients (a, b, c) push every singular value towards about 1 in few steps.
    The operations, in this order, are torch.optim.Muon's, matrix by matrix.

    Args:
        updates: (N, rows, cols) N matrices of one shape, any float dtype.
        coefficients: (a, b, c).
        steps: iterations.
        eps: the least norm divided by (a zero matrix stays zero).
        dtype: what the products compute in: bfloat16 as in torch.optim.Muon, or
            float32 where bfloat16 is emulated (`newton_schulz_dtype`).

    Returns:
        (N, rows, cols) in ``dtype``.
    """
    x = updates.to(dtype)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    x = x / torch.linalg.vector_norm(x, dim=(-2, -1), keepdim=True).clamp(min=eps)
    a, b, c = coefficients
    for _ in range(steps):
        gram = x @ x.mT  # (N, rows, rows) for a wide matrix: the smaller product
        polynomial = torch.baddbmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.baddbmm(x, polynomial, x, beta=a)
    return x.mT if tall else x


def adjusted_learning_rate(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """Muon's per-shape learning rate, as torch.optim.Muon's ``adjust_lr_fn`` names it:
    "original" (or None) sqrt(max(1, rows / cols)) x lr (Jordan et al.);
    "match_rms_adamw" 0.2 sqrt(max(rows, cols)) x lr, an update of AdamW's RMS
    (Liu et al. 2025, "Muon is Scalable for LLM Training")."""
    rows, cols = shape[:2]
    if adjust_lr_fn in (None, "original"):
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


def newton_schulz_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 where ``device`` computes it in hardware (a CUDA GPU with it, a CPU with
    AVX512-BF16 or AMX), as torch.optim.Muon does; float32 elsewhere: a CPU without them
    emulates bfloat16 products, many times slower than float32 (docs/benchmarks.md),
    which made Muon most of a CPU step."""
    if device.type == "cuda":
        return torch.bfloat16 if cuda_has_bfloat16() else torch.float32
    if device.type == "cpu":
        return torch.bfloat16 if cpu_has_bfloat16() else torch.float32
    return torch.bfloat16


class BatchedMuon(torch.optim.Muon):
    """torch.optim.Muon whose step orthogonalizes all matrices of one shape together.

    The same arguments, checks, state (a momentum buffer per matrix) and
    state_dict as torch.optim.Muon, so its checkpoints load either way. The step
    differs in one thing: the Newton-Schulz iterations (`orthogonalize`) run on a
    stack of every matrix of a shape, a few batched matrix products in place of a
    few per matrix; on a GPU, where small products leave most of it idle, that is
    what makes Muon cheap. Like torch's, it computes them in bfloat16, except on a
    device that only emulates bfloat16 (`newton_schulz_dtype`), where it computes
    them in float32. Nothing in
    the step reads a value back to the host (the learning rate is a Python float),
    so it never waits for the device.

    Batching does not change the arithmetic of a matrix product here: on CPU the
    stacked bfloat16 products gave torch.optim.Muon's updates bit for bit (tested,
    with ``products_dtype = torch.bfloat16``); on CUDA
    a batched bfloat16 product may round differently, within the test's tolerance.
    """

    # What the Newton-Schulz products compute in; None: `newton_schulz_dtype` of the
    # parameters' device. Set to torch.bfloat16 for torch.optim.Muon's arithmetic anywhere.
    products_dtype: torch.dtype | None = None

    @torch.no_grad()
    def step(self, closure=None):
        """One Muon step for every parameter with a gradient (see torch.optim.Muon:
        Nesterov momentum, orthogonalized update, decoupled weight decay)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            by_shape = defaultdict(list)
            for p in group["params"]:
                if p.grad is not None:
                    by_shape[p.shape].append(p)
            if not by_shape:
                continue
            first = next(iter(by_shape.values()))[0]
            dtype = self.products_dtype or newton_schulz_dtype(first.device)
            for shape, params in by_shape.items():
                updates = []
                for p in params:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torch.zeros_like(p.grad)
                    buf = state["momentum_buffer"]
                    buf.lerp_(p.grad, 1 - momentum)
                    update = p.grad.lerp(buf, momentum) if group["nesterov"] else buf
                    updates.append(update.to(dtype))  # bfloat16: stacked at half the size
                stacked = orthogonalize(
                    torch.stack(updates),
                    group["ns_coefficients"],
                    group["ns_steps"],
                    group["eps"],
                    dtype,
                )
                step_size = adjusted_learning_rate(lr, group["adjust_lr_fn"], shape)
                for p, update in zip(params, stacked.unbind(0), strict=True):
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(update, alpha=-step_size)
        return loss


class MultiOptimizer:
    """Several optimizers stepped together, looking like one: ``param_groups``
    lists all their groups, ``state_dict`` holds each one's state in order.

    Args:
        optimizers: the optimizers, each over a disjoint set of parameters.
    """

    def __init__(self, optimizers: list[torch.optim.Optimizer]):
        self.optimizers = optimizers

    @property
    def param_groups(self) -> list[dict]:
        """All parameter groups of all optimizers."""
        return [g for opt in self.optimizers for g in opt.param_groups]

    def step(self) -> None:
        """Step every optimizer."""
        for opt in self.optimizers:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every optimizer's gradients."""
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        """{"optimizers": [state_dict, ...]} in construction order."""
        return {"optimizers": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned (state moves to the parameters' device).

        Raises:
            ValueError: if the saved state holds another number of optimizers.
        """
        saved = state.get("optimizers")
        if saved is None or len(saved) != len(self.optimizers):
            raise ValueError("the saved optimizer state does not match train.optimizer")
        for opt, opt_state in zip(self.optimizers, saved, strict=True):
            opt.load_state_dict(opt_state)


def _undecayed_groups(model: nn.Module, params: list, cfg: TrainConfig) -> list[dict]:
    """AdamW groups without weight decay: one, or, with cfg.embedding_lr, the embedding
    tables at their own learning rate and the rest (norms, biases)."""
    if cfg.embedding_lr is None:
        return [{"params": params, "weight_decay": 0.0, "lr_scale": 1.0}]
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    scale = cfg.embedding_lr / cfg.learning_rate
    return [
        {"params": [p for p in params if id(p) in tables], "weight_decay": 0.0, "lr_scale": scale},
        {
            "params": [p for p in params if id(p) not in tables],
            "weight_decay": 0.0,
            "lr_scale": 1.0,
        },
    ]


def build_optimizer(model: nn.Module, cfg: TrainConfig, device_type: str):
    """The optimizer that ``cfg.optimizer`` names, over explicit parameter groups.

    Each group carries ``lr_scale``: the training loop sets its learning rate to the
    schedule's value times ``lr_scale`` (Muon's peak is ``train.muon_lr``).

    With ``embedding_lr`` set, the embedding tables get a group of their own whose
    ``lr_scale`` is embedding_lr / learning_rate (without it, no such group, so the
    optimizer state of earlier checkpoints still fits).

    Args:
        model: the (uncompiled) model.
        cfg: uses optimizer, learning_rate, muon_lr, muon_momentum, embedding_lr,
            weight_decay, beta1, beta2.
        device_type: "cuda" enables fused AdamW kernels; elsewhere multi-tensor
            (foreach) steps.

    Returns:
        torch.optim.AdamW for "adamw"; a `MultiOptimizer` (`BatchedMuon`, AdamW) for
        "muon".
    """
    fast = {"fused": True} if device_type == "cuda" else {"foreach": True}
    adam = {"lr": cfg.learning_rate, "betas": (cfg.beta1, cfg.beta2), **fast}
    if cfg.optimizer == "adamw":
        decay, no_decay = parameter_groups(model)
        groups = [
            {"params": decay["params"], "weight_decay": cfg.weight_decay, "lr_scale": 1.0},
            *_undecayed_groups(model, no_decay["params"], cfg),
        ]
        return torch.optim.AdamW(groups, **adam)
    hidden, other, no_decay = muon_parameter_groups(model)
    muon_lr = cfg.muon_lr if cfg.muon_lr is not None else cfg.learning_rate
    muon = BatchedMuon(
        [{"params": hidden["params"], "lr_scale": muon_lr / cfg.learning_rate}],
        lr=muon_lr,
        weight_decay=cfg.weight_decay,
        momentum=cfg.muon_momentum,
        # Scales each update to AdamW's RMS, so AdamW-sized learning rates carry over
        # (Liu et al. 2025, "Muon is Scalable for LLM Training").
        adjust_lr_fn="match_rms_adamw",
    )
    adam_groups = [
        {"params": other["params"], "weight_decay": cfg.weight_decay, "lr_scale": 1.0},
        *_undecayed_groups(model, no_decay["params"], cfg),
    ]
    adam_groups = [g for g in adam_groups if g["params"]]
    return MultiOptimizer([muon, torch.optim.AdamW(adam_groups, **adam)])


def warmed_up_decay(decay: float, folds: int) -> float:
    """The decay of the ``folds``-th fold into an average begun at the first step:
    min(decay, (1 + t) / (10 + t)) with t = folds (timm's ModelEmaV2 warm-up), so
    early weights, far from trained, are soon outweighed."""
    return min(decay, (1 + folds) / (10 + folds))


class WeightAverage:
    """The moving average of a model's trainable weights (see the module docstring).

    Args:
        model: the plain (uncompiled) model being trained; the average is a copy of it.
        decay: in (0, 1): the weight of the old average at each update (0.99 averages
            over about the last 100 steps).
        start: the optimizer step after which averaging starts (0: from the first,
            with the decay warmed up, `warmed_up_decay`).
    """

    def __init__(self, model: nn.Module, decay: float, start: int):
        self.decay, self.start = decay, start
        self.warmup = start == 0
        self.folds = 0  # updates after the first (a copy), as a host count
        self.averaged = AveragedModel(model, multi_avg_fn=self._fold)

    def decay_now(self) -> float:
        """The decay of the next fold."""
        return warmed_up_decay(self.decay, self.folds + 1) if self.warmup else self.decay

    def _fold(self, averaged: list, current: list, n_averaged) -> None:
        get_ema_multi_avg_fn(self.decay_now())(averaged, current, n_averaged)
        self.folds += 1

    @property
    def module(self) -> nn.Module:
        """The averaged model (same class as the trained one, in eval or train mode as
        set)."""
        return self.averaged.module

    @property
    def active(self) -> bool:
        """Whether averaging has begun (the average is then what the run evaluates)."""
        return int(self.averaged.n_averaged) > 0

    def update(self, model: nn.Module, steps_done: int) -> None:
        """Fold the weights after ``steps_done`` optimizer steps into the average (the
        first time, copy them), once steps_done > start."""
        if steps_done > self.start:
            self.averaged.update_parameters(model)

    def state(self) -> dict:
        """{"updates": how many steps the average holds, "warmup": whether its decay
        warms up} (its weights are saved as the checkpoint's model)."""
        return {"updates": int(self.averaged.n_averaged), "warmup": self.warmup}

    def restore(self, weights: dict, state: dict) -> None:
        """Put back an average saved as ``weights`` (a state_dict) and `state`. An
        average saved before the warm-up existed goes on without one, as it began."""
        self.module.load_state_dict(weights)
        self.averaged.n_averaged.fill_(state["updates"])
        self.folds = max(0, state["updates"] - 1)
        self.warmup = state.get("warmup", False)
