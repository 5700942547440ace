"""The steps' answer carries the new tables under their own keys, only when asked
(viz/steps_extras.py, /api/steps), with the numbers of the modules that make them;
a what-if zeroes a neuron named in the request."""

import json
import threading
import urllib.parse
import urllib.request

import pytest
import torch

from data.tokenizer import CharTokenizer
from tests.viz.conftest import PROMPT, VOCAB, ids_of
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.array_encoding import unpacked
from viz.attention_server import AttentionExplorer, ExplorerServer, PromptError
from viz.attention_steps import record_forward
from viz.block_steps import block_steps
from viz.logit_attribution import logit_attribution


@pytest.fixture(scope="module")
def explorer():
    return AttentionExplorer(sharp_gpt2(), CharTokenizer(VOCAB), "test")


def test_extras_come_only_when_asked_and_hold_the_modules_numbers(explorer):
    plain = explorer.steps(PROMPT, 1, 2)
    assert not {"words", "projections", "block", "attribution"} & set(plain)
    assert plain["order"][:4] == ["x", "xx", "xx_weights", "xx_out"]
    extras = ["words", "projections", "block", "attribution"]
    answer = explorer.steps(PROMPT, 1, 2, extras=extras, cell="q,4,5", neuron_cell=[6, 37])
    words = answer["words"]
    assert words["words"] == ["새가 ", "하늘을 ", "날았다"]
    assert words["rule"] == {"key": "words.rule", "args": {}}
    assert [sum(row) for row in words["tables"]["weights"]] == pytest.approx([1, 1, 1])
    record = record_forward(explorer.model, ids_of(PROMPT))
    assert answer["projections"]["columns"]["w_q"] == (
        explorer.model.blocks[1].attn.qkv_proj.weight[16:24].T.tolist()
    )
    assert list(answer["projections"]["steps"]) == ["xw_q", "xw_k", "xw_v"]
    block = answer["block"]
    assert block["order"] == [s.key for s in block_steps(record, 1)]
    assert block["steps"]["up"]["values"] == record.layers[1]["up"][0].tolist()
    attribution = answer["attribution"]
    expected = logit_attribution(explorer.model, record)
    assert attribution["total"] == expected["total"]
    assert attribution["label"] == VOCAB[expected["token"]].replace(" ", "␣")
    assert answer["cell"]["value"] == record.layers[1]["qkv"][0, 4, 21].item()
    assert answer["neuron_cell"]["act"] == record.layers[1]["act"][0, 6, 37].item()
    json.dumps(answer)  # every tensor written out
    with pytest.raises(PromptError, match="unknown extra 'mlp'"):
        explorer.steps(PROMPT, 1, 2, extras=["mlp"])
    with pytest.raises(PromptError, match="the cell must be in rows 0..9"):
        explorer.steps(PROMPT, 1, 2, cell={"part": "k", "row": 12, "column": 0})
    with pytest.raises(PromptError, match="neuron_cell must be"):
        explorer.steps(PROMPT, 1, 2, neuron_cell={"row": 1})


def test_a_neuron_switch_over_http(explorer):
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        query = urllib.parse.urlencode(
            {
                "prompt": PROMPT,
                "layer": 0,
                "head": 1,
                "switches": "zero_neuron",
                "neuron": 7,
                "extras": "block",
                "encoding": "float32",
            }
        )
        with urllib.request.urlopen(f"{server.url}api/steps?{query}", timeout=10) as response:
            answer = json.loads(response.read())
        bad = urllib.parse.urlencode({"prompt": PROMPT, "switches": "zero_neuron"})
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"{server.url}api/steps?{bad}", timeout=10)
        message = json.loads(error.value.read())["error"]
    finally:
        server.shutdown()
        server.server_close()
    assert answer["what_if"]["switches"] == ["zero_neuron"] and answer["what_if"]["neuron"] == 7
    assert answer["what_if"]["text"].endswith("W_down writes nothing (neuron 7)")
    act = unpacked(answer["block"]["steps"]["act"]["values"])
    assert not act[:, 7].any() and act[:, 6].any()
    assert message == "neuron must be a whole number in 0..95, got None"
    assert torch.equal(
        act[:, 8], record_forward(explorer.model, ids_of(PROMPT)).layers[0]["act"][0, :, 8]
    )
