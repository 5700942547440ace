"""Golden tests of the step-by-step view: every tensor the page or ``--steps`` shows is
the model's own forward pass, for a GPT-2 block (learned positions, LayerNorm) and a
modern one (RoPE, RMSNorm, QK-norm); the logit lens ends on the model's logits; with no
switch the numbers are the model's, and each what-if switch changes its step of its
head and nothing before it."""

import math

import pytest
import torch
import torch.nn.functional as F

from data.tokenizer import CharTokenizer
from model import causal_mask, explicit_attention, record_attention
from tests.conftest import sharp_model
from tests.viz.conftest import MODERN, PROMPT, VOCAB, ids_of
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.attention_presets import CHAPTER_SENTENCES, LATER_SENTENCES, prompt_presets
from viz.attention_server import AttentionExplorer, PromptError
from viz.attention_steps import (
    CHAPTER_STEPS,
    SWITCHES,
    WhatIf,
    attention_steps,
    record_forward,
    steps_json,
    xx_scores,
)
from viz.attention_weights import attention_and_next_logits
from viz.logit_lens import layer_logits, layer_predictions
from viz.messages import say


def gpt2_model():
    """Learned positions and LayerNorm (the sharp model of the explorer's tests)."""
    return sharp_gpt2()


def modern_model():
    """RoPE, RMSNorm and QK-norm, with VOCAB's size, 3 heads of 8 channels."""
    return sharp_model(len(VOCAB), block_size=16, n_layer=2, n_head=3, n_embd=24, **MODERN)


MODELS = {"gpt2": gpt2_model, "modern": modern_model}


@pytest.fixture(params=list(MODELS))
def model(request):
    return MODELS[request.param]()


def test_every_recorded_step_is_the_models_own(model):
    ids = ids_of(PROMPT)
    T = len(PROMPT)
    record = record_forward(model, ids)
    with torch.no_grad(), record_attention(model) as own_weights:
        own_logits, _ = model(ids[None])
    assert torch.equal(record.logits, own_logits)  # the explicit path, bit for bit
    with torch.no_grad():
        fused, _ = model(ids[None])  # the fused kernel training uses
    torch.testing.assert_close(record.logits, fused, atol=1e-5, rtol=0)
    d_k = model.config.head_size
    with torch.no_grad():
        for layer, (block, kept) in enumerate(zip(model.blocks, record.layers, strict=True)):
            assert torch.equal(kept["weights"], own_weights[layer])
            # X is the block's first norm of its input.
            assert torch.equal(kept["x"], block.ln_1(kept["residual_in"]))
            # q, k, v: the projection split into heads, QK-norm and RoPE where there.
            q, k, v = block.attn.split_heads(block.attn.qkv_proj(kept["x"]))
            if block.attn.rotary is not None:
                q, k = block.attn.rotary(q), block.attn.rotary(k)
            for name, tensor in (("q", q), ("k", k), ("v", v)):
                assert torch.equal(kept[name], tensor), name
            # Q·Kᵀ, ÷√d_k, the mask, the softmax, weights·V: the textbook formula.
            raw = q @ k.transpose(-2, -1)
            assert torch.equal(kept["scores"], raw)
            assert torch.equal(kept["scaled"], raw / math.sqrt(d_k))
            future = ~causal_mask(T)
            assert torch.equal(kept["masked"], kept["scaled"].masked_fill(future, -math.inf))
            assert torch.equal(kept["weights"], torch.softmax(kept["masked"], dim=-1))
            out, weights = explicit_attention(q, k, v)
            assert torch.equal(kept["weights"], weights) and torch.equal(kept["out"], out)
            assert torch.equal(kept["out"], kept["weights"] @ v)
            # The heads side by side, × W_o: the attention module's output.
            for head in range(model.config.n_head):
                columns = kept["concat"][0, :, head * d_k : (head + 1) * d_k]
                assert torch.equal(columns, kept["out"][0, head])
            projected = F.linear(
                kept["concat"], block.attn.out_proj.weight, block.attn.out_proj.bias
            )
            assert torch.equal(kept["projected"], projected)
            assert torch.equal(kept["attention"], projected)  # eval: no dropout after it
            fused_attention = block.attn(kept["x"])  # no recorder: the fused kernel
            torch.testing.assert_close(kept["attention"], fused_attention, atol=1e-5, rtol=0)
            # Added to the residual stream: what the block's MLP part reads.
            assert torch.equal(kept["residual_mid"], kept["residual_in"] + kept["attention"])
            after = kept["residual_mid"] + block.mlp(block.ln_2(kept["residual_mid"]))
            assert torch.equal(kept["residual_out"], after)
            if layer + 1 < len(record.layers):
                assert torch.equal(record.layers[layer + 1]["residual_in"], kept["residual_out"])
    assert record.layers[0]["weights"].amax() > 0.9  # sharp: the heads differ


def test_the_steps_follow_the_chapters_and_hold_the_recorded_tensors(model):
    ids = ids_of(PROMPT)
    record = record_forward(model, ids)
    steps = attention_steps(record, 1, 2)
    keys = [s.key for s in steps]
    assert keys == ["x", "xx", "xx_weights", "xx_out", "q", "k", "v", "scores", "scaled"] + [
        "masked",
        "weights",
        "out",
        "concat",
        "projected",
        "residual",
    ]
    chapters = [s.chapter for s in steps]
    assert chapters == sorted(chapters) and set(chapters) == set(CHAPTER_STEPS)
    by_key = {s.key: s for s in steps}
    kept = record.layers[1]
    for key in ("q", "k", "v", "scores", "scaled", "masked", "weights", "out"):
        assert torch.equal(by_key[key].values, kept[key][0, 2]) and by_key[key].head == 2
    assert torch.equal(by_key["x"].values, kept["x"][0])
    assert torch.equal(by_key["residual"].values, kept["residual_mid"][0])
    # The chapter's first form: X·Xᵀ, masked, softmax; no ÷√d_k.
    x = kept["x"][0]
    assert torch.equal(by_key["xx"].values, x @ x.T)
    future = ~causal_mask(len(PROMPT))
    expected = torch.softmax((x @ x.T).masked_fill(future, -math.inf), dim=-1)
    assert torch.equal(by_key["xx_weights"].values, expected)
    assert not by_key["xx_weights"].values[future].any()
    # Completed by the weighted sum weights·X, row by row as the chapter writes it.
    mix = by_key["xx_out"].values
    assert torch.equal(mix, expected @ x)
    for i in (0, 3):
        by_hand = sum(expected[i, j] * x[j] for j in range(i + 1))
        torch.testing.assert_close(mix[i], by_hand, atol=1e-5, rtol=0)
    torch.testing.assert_close(mix[0], x[0])  # the first character sees only itself
    # Which of QK-norm and RoPE the model applies is said on Q's table.
    config = model.config
    if config.position == "rope":
        assert say(by_key["q"].title) == (
            "Q: the queries, then QK-norm (each head's q and k divided by their root mean "
            "square), then RoPE (each channel pair rotated by the character's position)"
        )
    else:
        assert say(by_key["q"].title).startswith("Q: the queries, no QK-norm and no RoPE in this")
    assert f"d_k = {config.head_size}" in say(by_key["scaled"].title)
    with pytest.raises(ValueError, match="head must be in 0..2"):
        attention_steps(record, 0, 3)
    with pytest.raises(ValueError, match="layer must be in 0..1"):
        attention_steps(record, 2, 0)


def test_json_writes_the_mask_as_none_and_the_weights_future_as_zero():
    record = record_forward(gpt2_model(), ids_of("To be"))
    answer = steps_json(record, -1, [0, 2])
    assert answer["layer"] == 1 and set(answer["heads"]) == {"0", "2"}
    assert answer["what_if"] is None
    masked = answer["heads"]["2"]["masked"]
    assert masked["kind"] == "masked" and masked["shape"] == [5, 5]
    assert masked["values"][0][1:] == [None] * 4 and masked["values"][4][4] is not None
    weights = answer["heads"]["2"]["weights"]["values"]
    assert weights[0][1:] == [0.0] * 4
    assert answer["heads"]["0"]["q"]["columns"] == "channels"
    assert answer["layer_steps"]["xx"]["columns"] == "characters"
    assert answer["order"][0] == "x" and answer["order"][-1] == "residual"


def test_the_lens_after_the_last_block_is_the_models_prediction(model):
    ids = ids_of(PROMPT)
    record = record_forward(model, ids)
    lens = layer_logits(model, record)
    assert len(lens) == model.config.n_layer
    assert torch.equal(lens[-1], record.logits)  # the same computation on the same tensor
    assert not torch.equal(lens[0], record.logits)  # earlier blocks predict otherwise
    predictions = layer_predictions(model, record, top_k=4)
    probs = torch.softmax(record.logits[0].double(), dim=-1)
    top = torch.sort(probs, dim=-1, descending=True, stable=True)
    assert predictions["ids"][-1] == top.indices[:, :4].tolist()
    assert predictions["probabilities"][-1] == top.values[:, :4].tolist()
    assert len(predictions["ids"][0]) == len(PROMPT)


def explorer_of(model) -> AttentionExplorer:
    return AttentionExplorer(model, CharTokenizer(VOCAB), "test", ("To be, or not",))


def test_with_every_switch_off_the_next_character_table_is_unchanged(model):
    explorer = explorer_of(model)
    plain = explorer.explain(PROMPT, 0.8)
    none = explorer.explain(PROMPT, 0.8, explorer.what_if(1, 2, []))
    assert none == plain and plain["what_if"] is None and plain["model"] is None
    fresh = explorer_of(model).explain(PROMPT, 0.8, WhatIf(1, 2, ()))
    assert fresh["next"] == plain["next"] and fresh["logits"] == plain["logits"]
    # The table the page showed before the steps existed: the same numbers.
    weights, logits = attention_and_next_logits(model, ids_of(PROMPT))
    assert plain["logits"] == logits.tolist() and plain["weights"] == weights.tolist()


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_each_switch_changes_its_step_of_its_head_and_only_after_it(model, switch):
    ids = ids_of(PROMPT)
    T = len(PROMPT)
    own = record_forward(model, ids)
    layer, head = 1, 2
    changed = record_forward(model, ids, WhatIf(layer, head, (switch,)))
    assert changed.what_if.switches == (switch,)
    # Nothing before the switched layer changes; the other heads of that layer neither.
    for name, tensor in own.layers[0].items():
        assert torch.equal(changed.layers[0][name], tensor), name
    for other in (0, 1):
        for name in ("q", "k", "v", "scores", "scaled", "masked", "weights", "out"):
            assert torch.equal(
                changed.layers[layer][name][0, other], own.layers[layer][name][0, other]
            )
    kept = changed.layers[layer]
    x = kept["x"][0]
    d_k = model.config.head_size
    future = ~causal_mask(T)
    if switch == "no_scale":
        assert torch.equal(kept["scaled"][0, head], kept["scores"][0, head])
        assert torch.equal(kept["scores"], own.layers[layer]["scores"])
    elif switch == "no_mask":
        assert torch.equal(kept["masked"][0, head], kept["scaled"][0, head])
        assert kept["weights"][0, head, 0, 1:].sum() > 0.01  # row 0 attends to the future
    elif switch == "xx_scores":
        assert torch.equal(kept["scores"][0, head], x @ x.T)
        assert torch.equal(kept["scaled"][0, head], (x @ x.T) / math.sqrt(d_k))
    elif switch == "uniform":
        uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
        torch.testing.assert_close(kept["weights"][0, head], uniform, atol=1e-7, rtol=0)
        assert torch.equal(kept["masked"], own.layers[layer]["masked"])
    # The steps after the switch follow from it, through the model's own modules.
    weights = kept["weights"][0, head]
    if switch != "uniform":
        assert torch.equal(weights, torch.softmax(kept["masked"][0, head], dim=-1))
    assert torch.equal(kept["out"][0, head], weights @ kept["v"][0, head])
    if switch != "no_mask":
        assert not weights[future].any()
    assert not torch.equal(kept["weights"][0, head], own.layers[layer]["weights"][0, head])
    assert (changed.logits - own.logits).abs().max() > 1e-3  # the model ran on from there


def test_without_the_mask_only_rows_that_had_a_future_change(model):
    # The last character sees every other already: lifting the mask in the last layer
    # leaves its prediction as it was; in layer 0 the rows before it feed layer 1.
    ids = ids_of(PROMPT)
    own = record_forward(model, ids)
    last = record_forward(model, ids, WhatIf(1, 0, ("no_mask",)))
    assert torch.equal(last.logits[0, -1], own.logits[0, -1])
    assert (last.logits[0, :-1] - own.logits[0, :-1]).abs().max() > 1e-3
    first = record_forward(model, ids, WhatIf(0, 0, ("no_mask",)))
    assert (first.logits[0, -1] - own.logits[0, -1]).abs().max() > 1e-3


def test_switches_combine_and_are_checked(model):
    ids = ids_of(PROMPT)
    T = len(PROMPT)
    both = record_forward(model, ids, WhatIf(0, 0, ("uniform", "no_mask")))
    torch.testing.assert_close(both.layers[0]["weights"][0, 0], torch.full((T, T), 1 / T))
    assert both.what_if.switches == ("no_mask", "uniform")  # sorted
    raw = record_forward(model, ids, WhatIf(0, 0, ("xx_scores", "no_scale")))
    x = raw.layers[0]["x"][0]
    assert torch.equal(raw.layers[0]["scaled"][0, 0], x @ x.T)  # the chapter's form
    assert torch.equal(raw.layers[0]["weights"][0, 0], xx_scores(x)[1])
    with pytest.raises(ValueError, match="unknown what-if switch 'no_softmax'"):
        WhatIf(0, 0, ("no_softmax",))
    with pytest.raises(ValueError, match="what-if head must be in 0..2"):
        record_forward(model, ids, WhatIf(0, 3, ("no_mask",)))
    explorer = explorer_of(model)
    with pytest.raises(PromptError, match="layer must be a whole number in 0..1"):
        explorer.what_if(5, 0, ["no_mask"])
    with pytest.raises(PromptError, match="unknown switch 'x'"):
        explorer.what_if(0, 0, ["x"])
    with pytest.raises(PromptError, match="head must be a whole number"):
        explorer.what_if(0, True, ["no_mask"])


def test_what_if_answers_carry_the_models_own_numbers_to_compare():
    model = gpt2_model()
    explorer = explorer_of(model)
    plain = explorer.explain(PROMPT)
    what_if = explorer.what_if(1, 2, ["uniform"])
    changed = explorer.explain(PROMPT, 1.0, what_if)
    assert changed["what_if"]["switches"] == ["uniform"]
    assert changed["what_if"]["text"].startswith("layer 1, head 2: uniform weights")
    assert changed["model"]["logits"] == plain["logits"]
    assert changed["model"]["head_weights"] == plain["weights"][1][2]
    assert changed["logits"] != plain["logits"] and changed["next"] != plain["next"]
    assert changed["weights"][0] == plain["weights"][0]  # layer 0 is before the switch
    steps = explorer.steps(PROMPT, 1, 2, what_if)
    assert steps["what_if"] == changed["what_if"]
    assert steps["heads"]["2"]["weights"]["values"] == changed["weights"][1][2]
    assert explorer.steps(PROMPT, 1, 2)["heads"]["2"]["weights"]["values"] == plain["weights"][1][2]


def test_bae_reads_its_context_only_where_words_precede_it(korean_path):
    """What the page says beside the 배 presets: at position 0 (the chapters' sentences)
    배's weights and next-character logits are the same in all three; with other words
    before it (LATER_SENTENCES) they differ."""
    tokenizer = CharTokenizer.from_text(korean_path.read_text(encoding="utf-8"))
    model = sharp_model(tokenizer.vocab_size, 32, n_layer=2, n_head=2, n_embd=32)

    def bae_row(sentence):
        # Causal: the prompt up to 배 gives 배's row and next logits of the whole sentence.
        ids = torch.tensor(tokenizer.encode(sentence[: sentence.index("배") + 1]), dtype=torch.long)
        weights, logits = attention_and_next_logits(model, ids)
        return weights[:, :, -1].tolist(), logits.tolist()

    first = [bae_row(s) for s in CHAPTER_SENTENCES if s.startswith("배")]
    later = [bae_row(s) for s in LATER_SENTENCES]
    assert len(first) == 3 and all(row == first[0] for row in first[1:])
    assert len({str(w) for w, _ in later}) == 3 and len({str(x) for _, x in later}) == 3


def test_presets_offer_the_chapters_sentences_the_vocabulary_holds(korean_path):
    korean = CharTokenizer.from_text(korean_path.read_text(encoding="utf-8"))
    presets = prompt_presets(korean, 128, ("To be, or not to be", "새가 하늘을 날았다", "ROMEO:"))
    # The run's are not Korean; 배 later in a sentence follows the chapters' own.
    assert [p["text"] for p in presets] == list(CHAPTER_SENTENCES + LATER_SENTENCES)
    assert [p["source"] for p in presets] == ["chapter"] * 6 + ["later"] * 3
    # Each later sentence puts other words before 배: a causal model reads them there.
    before = {p["text"][: p["text"].index("배")] for p in presets if p["source"] == "later"}
    assert len(before) == 3 and "" not in before
    missing = {p["text"]: p["missing"] for p in presets}
    assert missing["배를 탔다"] == ["탔"]  # the sample never has 탔
    assert all(not m for text, m in missing.items() if text != "배를 탔다")
    english = CharTokenizer.from_text("To be, or not to be: ROMEO and JULIET\n")
    presets = prompt_presets(english, 8, ("To be, or not to be", "ROMEO:", "새가"))
    assert presets == [
        {"text": "To be, o", "source": "run", "missing": []},
        {"text": "ROMEO:", "source": "run", "missing": []},
    ]
