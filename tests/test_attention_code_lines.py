"""The code lines the attention page shows ("model/gpt.py · Block.forward: ...") are the
model's own: each piece of `MODEL_CODE` is verbatim in the source of the function it
names, and every step the page shows names its code through `MODEL_CODE` (or is the one
table the model does not compute, X·Xᵀ)."""

import inspect

import pytest
import torch

import model.gpt
from conftest import sharp_model
from viz.attention_steps import MODEL_CODE, XX_CODE, attention_steps, model_code, record_forward


def function_source(qualname: str) -> str:
    """The source of model.gpt's function or method ``qualname`` ("Block.forward")."""
    target = model.gpt
    for part in qualname.split("."):
        target = getattr(target, part)
    return inspect.getsource(target)


@pytest.mark.parametrize("key", sorted(MODEL_CODE))
def test_each_code_piece_is_in_the_function_it_names(key):
    where, source = MODEL_CODE[key]
    assert source in function_source(where), f"{key}: {source!r} is not in {where}"


@pytest.mark.parametrize("position,qk_norm", [("learned", False), ("rope", True)])
def test_every_step_shows_a_code_line_of_the_model(position, qk_norm):
    net = sharp_model(position=position, qk_norm=qk_norm)
    record = record_forward(net, torch.tensor([1, 2, 3]))
    shown = {step.code for step in attention_steps(record, 0, 0)}
    pieces = {model_code(*keys) for keys in CODE_CHOICES} | {XX_CODE}
    assert shown <= pieces, shown - pieces
    for code in shown - {XX_CODE}:
        for line in code.split("; "):
            where, source = line.split(": ", 1)
            assert source in function_source(where)


# The code lines a step may show: one piece, or q and k's chain of pieces.
CODE_CHOICES = [(key,) for key in MODEL_CODE] + [
    ("qkv", "qk_norm"),
    ("qkv", "rope"),
    ("qkv", "qk_norm", "rope"),
]
