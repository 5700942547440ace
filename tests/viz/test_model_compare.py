"""Two models on one prompt (viz/model_compare.py, explore_attention.py --compare): the
numbers are each model's own, the differences are computed from them, and a character
one model lacks is said rather than failing."""

import json

import pytest
import torch

import explore_attention
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from model.checkpoint import save_checkpoint
from training import load_config
from training.checkpoint import checkpoint_contents
from training.init_from import grown_weights
from viz.char_labels import visible_char
from viz.model_compare import (
    ComparedModel,
    compare_models,
    comparison_json,
    format_comparison,
)

PARENT_CHARS = list(" abcdefghijklmnopqrstuvwxyz:")
CHILD_CHARS = PARENT_CHARS + ["가", "é"]


def tiny(chars, seed, state=None) -> GPT:
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=len(chars), n_layer=2, n_head=2, n_embd=16, block_size=16)
    model = GPT(config)
    if state is not None:
        model.load_state_dict(grown_weights(state, config))
    return model.eval()


@pytest.fixture
def pair():
    parent = tiny(PARENT_CHARS, 0)
    child = tiny(CHILD_CHARS, 1, parent.state_dict())
    with torch.no_grad():  # a little fine-tuning: every weight moves
        for p in child.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return (
        ComparedModel("child", child, CharTokenizer(CHILD_CHARS)),
        ComparedModel("parent", parent, CharTokenizer(PARENT_CHARS)),
    )


def test_a_model_against_itself_differs_nowhere(pair):
    child, _ = pair
    result = compare_models(child, child, "abc: ab")
    assert result["distance"] == 0
    assert not any(changed for *_, changed in result["next"])
    assert not any(differs for *_, differs in result["layers"])
    assert torch.equal(result["heads"], torch.zeros(2, 2))


def test_the_numbers_are_each_models_own(pair):
    child, parent = pair
    result = compare_models(child, parent, "hello wor")
    a, b = result["models"]
    with torch.no_grad():
        pa = torch.softmax(
            child.model(torch.tensor([child.tokenizer.encode("hello wor").tolist()]))[0][
                0, -1
            ].double(),
            -1,
        )
        pb = torch.softmax(
            parent.model(torch.tensor([parent.tokenizer.encode("hello wor").tolist()]))[0][
                0, -1
            ].double(),
            -1,
        )
    assert [c for c, _ in a["next"]] == [CHILD_CHARS[i] for i in pa.topk(5).indices]
    for c, p_child, p_parent, changed in result["next"]:
        assert p_child == pytest.approx(float(pa[CHILD_CHARS.index(c)]), abs=1e-6)
        want = None if c not in PARENT_CHARS else float(pb[PARENT_CHARS.index(c)])
        assert p_parent == pytest.approx(want, abs=1e-6)
        assert changed == (abs(p_child - (p_parent or 0.0)) >= 0.05)
    # Total variation over the union of the vocabularies; the parent lacks 가 and é.
    padded = torch.cat([pb, torch.zeros(2, dtype=pb.dtype)])
    assert result["distance"] == pytest.approx(0.5 * float((pa - padded).abs().sum()), abs=1e-6)
    T = 9
    diff = (a["weights"] - b["weights"]).abs().sum((-1, -2)) / (T * (T + 1) / 2)
    torch.testing.assert_close(result["heads"], diff)
    assert result["heads"].min() > 0


def test_a_character_one_model_lacks_is_said(pair):
    child, parent = pair
    result = compare_models(child, parent, "ab 가")
    assert result["models"][1]["missing"] == ["가"] and "next" in result["models"][0]
    assert result["next"] is None and result["heads"] is None
    text = format_comparison(result)
    assert "B lacks 1 character(s) of the prompt, '가': it cannot read it" in text
    # A reads it: its own numbers, alone.
    next_a = result["models"][0]["next"]
    assert "next character in A alone" in text
    assert f"  {visible_char(next_a[0][0]):<8} {next_a[0][1]:8.4f}" in text
    assert "what each layer would predict next in A (logit lens)" in text
    assert "  layer 1: " in text


def test_a_long_prompt_is_read_as_its_last_block_size_characters(pair):
    """As the page and sample.py crop: the characters the next one is predicted from."""
    child, parent = pair
    prompt = "abcdefghijklmnopqrstu"  # 21 characters, block_size 16
    result = compare_models(child, parent, prompt)
    assert [side["prompt"] for side in result["models"]] == [prompt[-16:]] * 2
    ids = torch.tensor([PARENT_CHARS.index(c) for c in prompt[-16:]])
    with torch.no_grad():
        logits = parent.model(ids[None])[0][0, -1]
    best = PARENT_CHARS[int(logits.argmax())]
    assert result["models"][1]["next"][0][0] == best


def test_explore_attention_compare_prints_both_models(tmp_path, pair, capsys):
    cfg = load_config(None, [f"out_dir={tmp_path}"])
    for side in pair:
        folder = tmp_path / side.label
        folder.mkdir()
        contents = checkpoint_contents(side.model, side.tokenizer, cfg, 10, 3.0)
        save_checkpoint(contents, folder / "ckpt.pt")
    argv = ["--out-dir", str(tmp_path / "child"), "--prompt", "abc", "--device", "cpu"]
    code = explore_attention.main([*argv, "--compare", str(tmp_path / "parent")])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(
        f"A: {tmp_path / 'child' / 'ckpt.pt'}\nB: {tmp_path / 'parent' / 'ckpt.pt'}\n"
    )
    assert "total variation distance between the two distributions: " in out
    assert "layer 1 head " in out
    assert explore_attention.main([*argv, "--compare", str(tmp_path / "nothing")]) == 2
    assert "--compare" in capsys.readouterr().err


def test_the_answer_for_a_page_carries_both_models_as_json(pair):
    child, parent = pair
    result = compare_models(child, parent, "hello")
    answer = json.loads(json.dumps(comparison_json(result)))
    a, b = answer["models"]
    assert (a["label"], b["label"]) == ("child", "parent")
    assert a["weights"] == result["models"][0]["weights"].tolist()
    assert answer["heads"] == result["heads"].tolist()
    assert answer["next"][0] == list(result["next"][0])
    lacking = comparison_json(compare_models(child, parent, "é"))
    assert lacking["models"][1]["missing"] == ["é"] and "next" not in lacking["models"][1]
