"""What the walkthrough and the page say about the what-if switches, held to the model: no
causal mask in the last layer leaves the next character as it was (the last character
already sees every other); in layer 0 it changes the likeliest next character of some
earlier row, and the page's answer names exactly those rows; a switch changes that one
head only and runs the rest of the model on it; and under a switch every caption says
what was changed (no −∞, no "the future gets exactly 0" under no mask), in both
languages, on the page and in --steps."""

import pytest
import torch

import explore_attention
from data.tokenizer import CharTokenizer
from tests.viz.conftest import PROMPT, VOCAB, save_sharp_checkpoint
from viz.attention_server import AttentionExplorer
from viz.attention_steps import SWITCHES, WhatIf, attention_steps, steps_json
from viz.messages import LANGUAGES, Message, say


@pytest.fixture(scope="module")
def explorer(tmp_path_factory):
    model = save_sharp_checkpoint(tmp_path_factory.mktemp("ckpt") / "ckpt.pt")
    return AttentionExplorer(model, CharTokenizer(VOCAB), "sharp")


def ids() -> torch.Tensor:
    return torch.tensor([VOCAB.index(c) for c in PROMPT])


@pytest.mark.parametrize("head", [0, 1, 2])
def test_no_mask_in_the_last_layer_leaves_the_next_character(explorer, head):
    what_if = explorer.what_if(1, head, ["no_mask"])
    answer = explorer.explain(PROMPT, 1.0, what_if)
    own = explorer.forward(ids()).logits[0, -1]
    # The last row sees every character with or without the mask; no layer comes after.
    torch.testing.assert_close(torch.tensor(answer["logits"]), own, atol=1e-5, rtol=0)
    assert [c["position"] for c in answer["model"]["changed"]] != [len(PROMPT) - 1]
    # Its rows before the last do change: weights now reach the future.
    switched = torch.tensor(answer["weights"][1][head])
    assert switched.triu(1).sum() > 0.5


def test_no_mask_in_layer_0_changes_an_earlier_rows_prediction_and_the_page_names_it(explorer):
    found = []
    for head in range(3):
        what_if = explorer.what_if(0, head, ["no_mask"])
        changed = explorer.explain(PROMPT, 1.0, what_if)["model"]["changed"]
        own = explorer.forward(ids()).logits[0].argmax(-1)
        mine = explorer.forward(ids(), what_if).logits[0].argmax(-1)
        differ = (own != mine).nonzero().flatten().tolist()
        assert [c["position"] for c in changed] == differ  # exactly those rows, in order
        for c in changed:
            assert (c["own"], c["what_if"]) == (own[c["position"]], mine[c["position"]])
        found += [c["position"] for c in changed if c["position"] < len(PROMPT) - 1]
    assert found, "no earlier row changes under no_mask in layer 0: the page would point nowhere"


def test_without_a_switch_the_answer_names_no_rows(explorer):
    assert explorer.explain(PROMPT)["model"] is None


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_a_switch_changes_that_head_only_and_the_rest_runs_on_it(explorer, switch):
    own = explorer.forward(ids())
    mine = explorer.forward(ids(), WhatIf(1, 2, (switch,)))
    assert torch.equal(own.layers[0]["weights"], mine.layers[0]["weights"])  # before it
    for head in (0, 1):  # the other heads of its layer
        assert torch.equal(own.layers[1]["weights"][0, head], mine.layers[1]["weights"][0, head])
    assert not torch.equal(own.layers[1]["weights"][0, 2], mine.layers[1]["weights"][0, 2])
    assert not torch.equal(own.logits, mine.logits)  # the LM head ran on what it left


@pytest.mark.parametrize("lang", LANGUAGES)
def test_captions_under_no_mask_say_what_was_changed(explorer, lang):
    record = explorer.forward(ids(), WhatIf(0, 1, ("no_mask",)))
    steps = {s.key: s for s in attention_steps(record, 0, 1)}
    assert steps["masked"].title.key == "step.masked.no_mask.title"
    assert steps["weights"].title.key == "step.weights.no_mask.title"
    for step in steps.values():
        for text in (say(step.title, lang), say(step.formula, lang)):
            assert "−∞" not in text and "exactly 0" not in text and "정확히 0" not in text
    assert torch.isfinite(steps["masked"].values).all()  # nothing was set to −∞
    # Another head of that layer keeps the mask, and its captions say so.
    other = {s.key: s for s in attention_steps(record, 0, 0)}
    assert other["masked"].title == Message("step.masked.title", {})
    page = steps_json(record, 0, [1])["heads"]["1"]
    assert page["masked"]["title"] == {"key": "step.masked.no_mask.title", "args": {}}


@pytest.mark.parametrize("switch", ["uniform", "no_scale", "xx_scores"])
def test_each_switch_retitles_the_step_it_replaces(explorer, switch):
    record = explorer.forward(ids(), WhatIf(1, 0, (switch,)))
    replaced = {"uniform": "weights", "no_scale": "scaled", "xx_scores": "scores"}[switch]
    titles = {s.key: s.title.key for s in attention_steps(record, 1, 0)}
    assert titles[replaced] == f"step.{replaced}.{switch}.title"
    others = [key for k, key in titles.items() if k != replaced]
    assert all(key == f"step.{key.split('.')[1]}.title" for key in others)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_steps_in_a_terminal_under_no_mask_print_no_minus_infinity(tmp_path, capsys, lang):
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--steps"]
    assert explore_attention.main([*argv, "--layer", "0", "--switches", "no_mask"]) == 0
    out = capsys.readouterr().out
    assert "−∞" not in out and "WHAT-IF" in out
    assert explore_attention.main([*argv, "--layer", "0", "--lang", lang]) == 0
    out = capsys.readouterr().out
    assert out.count("−∞") >= len(PROMPT) * (len(PROMPT) - 1) // 2  # the mask, every future
    assert ("6단계 · 인과 마스크" if lang == "ko" else "Step 6 · the causal mask") in out
