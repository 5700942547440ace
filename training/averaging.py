"""Weight averaging: an exponential moving average of the weights over the last steps.

With a learning rate that ends above zero, the last iterates still jump around the
minimum they are near; the average of the last few hundred sits closer to it, and its
validation loss is lower (Polyak & Juditsky 1992; the exponential form as in Izmailov et
al. 2018, "Averaging Weights Leads to Wider Optima"). With ``train.ema_decay`` > 0:

    average = weights after step ema_start + 1
    average = decay * average + (1 - decay) * weights      after every later step

and from its first step on, the average is what a run evaluates, logs, saves as the
model in ckpt.pt and best.pt, and samples from; the weights being trained are kept in
ckpt.pt too, so a resumed run continues them (and the average) exactly.
torch.optim.swa_utils.AveragedModel does the averaging.
"""

from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


class WeightAverage:
    """The moving average of a model's trainable weights.

    Args:
        model: the plain (uncompiled) model being trained; the average is a copy of it.
        decay: in (0, 1): the weight of the old average at each update (0.99 averages
            over about the last 100 steps).
        start: the optimizer step after which averaging starts (0: from the first).
    """

    def __init__(self, model: nn.Module, decay: float, start: int):
        self.averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
        self.start = start

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
        """{"updates": how many steps the average holds} (its weights are saved as the
        checkpoint's model)."""
        return {"updates": int(self.averaged.n_averaged)}

    def restore(self, weights: dict, state: dict) -> None:
        """Put back an average saved as ``weights`` (a state_dict) and `state`."""
        self.module.load_state_dict(weights)
        self.averaged.n_averaged.fill_(state["updates"])
