"""Tables packed as float32 bytes (viz/array_encoding.py) hold exactly the model's
numbers, the mask's −∞ included, and the server answers in them on request."""

import json

import pytest
import torch

from data.tokenizer import CharTokenizer
from tests.viz.conftest import PROMPT, VOCAB
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.array_encoding import encode_arrays, packed, tensor_lists, unpacked
from viz.attention_server import AttentionExplorer, PromptError


def test_packed_tables_are_the_float32_values_and_a_quarter_of_the_text():
    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 3, 40, 40), dim=-1)
    masked = torch.randn(5, 5).masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), -torch.inf)
    answer = {"weights": weights, "masked": masked, "next": [{"id": 3}], "n": 2}
    small = encode_arrays(answer, "float32")
    assert small["next"] == [{"id": 3}] and small["n"] == 2
    assert small["weights"]["dtype"] == "float32" and small["weights"]["shape"] == [2, 3, 40, 40]
    assert torch.equal(unpacked(small["weights"]), weights)
    assert torch.equal(unpacked(small["masked"]), masked)  # −∞ stays −∞
    # Little-endian float32, row-major: the first value is the first 4 bytes.
    assert packed(torch.tensor([1.0, -2.0]))["data"] == "AACAPwAAAMA="
    lists = encode_arrays(answer, "json")
    assert lists["weights"] == weights.tolist()
    assert lists["masked"][0] == [masked[0, 0].item(), None, None, None, None]
    assert tensor_lists(torch.tensor(2.5)) == 2.5
    assert len(json.dumps(small)) < len(json.dumps(lists)) / 3
    with pytest.raises(ValueError, match="encoding must be one of json, float32"):
        encode_arrays(answer, "float16")


def test_the_server_answers_in_either_encoding_with_the_same_numbers():
    explorer = AttentionExplorer(sharp_gpt2(), CharTokenizer(VOCAB), "test")
    plain = explorer.explain(PROMPT)
    small = explorer.explain(PROMPT, encoding="float32")
    assert small["next"] == plain["next"] and small["lens"] == plain["lens"]
    for key in ("weights", "average", "logits"):
        assert unpacked(small[key]).tolist() == plain[key], key
    steps = explorer.steps(PROMPT, 1, 2, encoding="float32", extras=["block"])
    json_steps = explorer.steps(PROMPT, 1, 2, extras=["block"])
    masked = steps["heads"]["2"]["masked"]
    assert masked["values"]["shape"] == [10, 10] and masked["shape"] == [10, 10]
    values = unpacked(masked["values"])
    expected = [
        [-torch.inf if v is None else v for v in row]
        for row in json_steps["heads"]["2"]["masked"]["values"]
    ]
    assert values.tolist() == expected
    up = steps["block"]["steps"]["up"]["values"]
    assert unpacked(up).tolist() == json_steps["block"]["steps"]["up"]["values"]
    with pytest.raises(PromptError, match="encoding must be one of json, float32"):
        explorer.explain(PROMPT, encoding="text")
