"""The precision a run trains in (`train.dtype`): the autocast dtype of its forward
passes, and with float16 the loss scaling that keeps small gradients from vanishing.

    auto      bfloat16 on a CUDA GPU with bfloat16 arithmetic (compute capability 8.0,
              Ampere, or later); float16 with loss scaling on an older one (a T4, a
              V100); float32 on CPU and MPS
    float32   no autocast at all: a CPU run computes exactly as before the key existed
    bfloat16  autocast in bfloat16 (float32's exponent range: no scaling needed)
    float16   autocast in float16, with loss scaling

The weights, the gradients, the optimizer state and the loss stay float32 whatever the
choice: autocast runs the matrix products in the lower precision, and GPT.forward
computes the loss in at least float32. Evaluation and the TensorBoard sample run in the
same dtype as training.

Loss scaling (Micikevicius et al. 2018, "Mixed Precision Training", section 3.2), with
``torch.amp.GradScaler``: float16's smallest normal number is about 6e-5, and a
gradient smaller than that loses its digits, or becomes 0, as it flows back through a
float16 product. The loss is multiplied by a scale S (2**16 at first) before the
backward pass, so the gradients flow S times larger, and divided by S again (unscaled)
before clipping and the optimizer step. A step whose gradients overflowed (inf or NaN
after unscaling) is skipped and S halves; after 2,000 steps without one, S doubles. A
skipped step is not a failure: the run counts them (`SkippedSteps`; TensorBoard's
train/skipped_steps, the progress lines, `TrainResult.skipped_steps`). A loss that is
itself NaN or infinite still stops the run. ckpt.pt holds the scaler's state and the
count, so a resumed float16 run continues exactly.

With bfloat16 and float32 the GradScaler is disabled: every call on it passes straight
through (``scale`` returns the loss itself, ``step`` is ``optimizer.step()``), as in
nanoGPT's train.py.
"""

from dataclasses import dataclass

import torch

from model.device import (
    DtypeError,
    auto_dtype,
    autocast_context,
    resolve_dtype,
)
from training.config import ConfigError

# The loss scale a float16 run starts from: GradScaler's default (tests raise it to
# plant an overflow).
INITIAL_LOSS_SCALE = 2.0**16
SCALER_KEY = "scaler"  # ckpt.pt's entry: GradScaler.state_dict(), float16 runs only
SKIPPED_KEY = "skipped_steps"  # ckpt.pt's entry: steps loss scaling skipped so far


@dataclass(frozen=True)
class Precision:
    """What a run computes in.

    Attributes:
        given: train.dtype as configured (auto, float32, bfloat16, float16).
        dtype: what it resolved to on ``device``.
        device: where the run trains.
        reason: for auto, why it chose ``dtype`` ("on CPU", "this GPU has no bfloat16").
    """

    given: str
    dtype: torch.dtype
    device: torch.device
    reason: str = ""

    @property
    def name(self) -> str:
        """The resolved dtype as train.dtype spells it: float32, bfloat16 or float16."""
        return str(self.dtype).removeprefix("torch.")

    @property
    def loss_scaling(self) -> bool:
        """Whether the run scales its loss (float16)."""
        return self.dtype == torch.float16

    @property
    def note(self) -> str:
        """A word at the start for a choice that runs but hardly pays: float16 on a CPU,
        which computes it at speed only with AVX512-FP16 or AMX-FP16 and otherwise
        emulates it, far slower than float32 (docs/benchmarks.md, precision); "" else."""
        if self.dtype != torch.float16 or self.device.type != "cpu":
            return ""
        return (
            "note: train.dtype=float16 on a CPU: most CPUs (all without AVX512-FP16 or "
            "AMX-FP16) emulate float16, far slower than float32; float16 is for GPUs "
            "without bfloat16. On a CPU take float32, or bfloat16 where `lscpu` lists "
            "avx512_bf16 or amx_bf16"
        )

    def autocast(self):
        """The context a forward pass runs in (`model.device.autocast_context`): no
        autocast at all for float32."""
        return autocast_context(self.device, self.dtype)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A GradScaler for the run's device, enabled for float16 only (disabled, it
        passes every call through)."""
        return torch.amp.GradScaler(
            self.device.type, init_scale=INITIAL_LOSS_SCALE, enabled=self.loss_scaling
        )

    def describe(self) -> str:
        """For the start line, e.g. "dtype float16 (auto: this GPU has no bfloat16),
        loss scaling"."""
        text = f"dtype {self.name}"
        if self.given == "auto":
            text += f" (auto: {self.reason})"
        return text + (", loss scaling" if self.loss_scaling else "")


def auto_reason(device: torch.device) -> str:
    """Why `auto` computes in what it does on ``device`` (see `model.device.auto_dtype`)."""
    if device.type != "cuda":
        return f"float32 on {device.type.upper()}"
    has = auto_dtype(device) == torch.bfloat16
    return "this GPU has bfloat16" if has else "this GPU has no bfloat16"


def resolve_precision(given: str, device: torch.device) -> Precision:
    """The precision train.dtype=``given`` means on ``device``.

    Raises:
        ConfigError: naming train.dtype, for a dtype the device cannot compute in
            (bfloat16 on a CUDA GPU without it, or on MPS before macOS 14).
    """
    if given == "auto":
        return Precision(given, auto_dtype(device), device, auto_reason(device))
    try:
        dtype = resolve_dtype(given, device, setting="train.dtype")
    except DtypeError as e:
        raise ConfigError(str(e)) from None
    return Precision(given, dtype, device)


def saved_dtype(ckpt: dict, device: torch.device) -> str:
    """The dtype a checkpoint's run trained in: its resolved train.dtype, or, for a
    checkpoint written before that key existed, what that code computed in on
    ``device``: bfloat16 where ``torch.cuda.is_bf16_supported()`` (emulated or not),
    else float32."""
    saved = ckpt["config"].get("train", {}).get("dtype")
    if saved is not None:
        return saved
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return "bfloat16"
    return "float32"


class SkippedSteps:
    """How many optimizer steps loss scaling skipped, counted on the device.

    GradScaler skips a step exactly when an unscaled gradient holds inf or NaN, and then
    the gradient norm (of the unscaled gradients, before clipping) is not finite either:
    adding up ``~isfinite(norm)`` counts the skips with no host read per step. The total
    is read at log intervals and checkpoints.

    Args:
        device: where the gradient norms live.
        before: steps skipped before this process started (from the checkpoint).
    """

    def __init__(self, device: torch.device, before: int = 0):
        self.before = before
        self.count = torch.zeros((), dtype=torch.long, device=device)

    def record(self, grad_norm: torch.Tensor) -> None:
        """Count the step whose 0-dim gradient norm is ``grad_norm`` if it was skipped."""
        self.count += ~torch.isfinite(grad_norm)

    def total(self) -> int:
        """Steps skipped since the run began (reading it waits for the device)."""
        return self.before + int(self.count)


def loss_scaling_state(scaler: torch.amp.GradScaler, skipped: SkippedSteps | None) -> dict:
    """What ckpt.pt keeps of loss scaling: the scaler's state (its scale and the steps
    since it last changed) and the skipped steps; nothing for a run without it."""
    if not scaler.is_enabled() or skipped is None:
        return {}
    return {SCALER_KEY: scaler.state_dict(), SKIPPED_KEY: skipped.total()}


def restore_loss_scaling(ckpt: dict, scaler: torch.amp.GradScaler) -> int:
    """Put back the scaler's state saved by `loss_scaling_state`, if both the checkpoint
    and this run scale the loss; a float16 run resumed from a checkpoint without it (a
    bfloat16 or float32 run, or an older one) starts scaling afresh.

    Returns:
        The steps skipped before the checkpoint (0 if it has no count).
    """
    if not scaler.is_enabled() or SCALER_KEY not in ckpt:
        return 0
    scaler.load_state_dict(ckpt[SCALER_KEY])
    return int(ckpt.get(SKIPPED_KEY, 0))
