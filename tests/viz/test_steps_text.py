"""``explore_attention.py --steps`` prints the new tables with the page's numbers: per
word, W_q and a worked cell of Q, the rest of the block with a worked neuron, and what
each part pushes on the predicted next character."""

import re

import explore_attention
from data.tokenizer import CharTokenizer
from tests.viz.conftest import PROMPT, VOCAB
from viz.attention_server import AttentionExplorer


def test_steps_print_the_new_tables_with_the_pages_numbers(checkpoint, capsys):
    model, path = checkpoint
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--steps"]
    args = ["--layer", "1", "--head", "2", "--decimals", "4", "--cell", "q,4,5"]
    assert explore_attention.main([*argv, *args, "--neuron-cell", "6,37"]) == 0
    out = capsys.readouterr().out
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), str(path))
    extras = ["words", "attribution"]
    page = explorer.steps(PROMPT, 1, 2, extras=extras, cell="q,4,5", neuron_cell="6,37")
    # Per word: the page's word table, row by row, each row summing to 1.
    section = out[out.index("weights per word of layer 1, head 2") :]
    rows = [line for line in section.splitlines()[3:6]]
    for row, expected in zip(rows, page["words"]["tables"]["weights"], strict=True):
        numbers = re.findall(r"\d\.\d{4}", row)
        assert numbers == [f"{v:.4f}" for v in expected] + ["1.0000"]
    assert "0 새가␣" in section and "2 날았다" in section
    assert "Step 2 · weights·X: each character's mix" in out
    # The worked cell and neuron: the page's sums.
    assert f"sum = {page['cell']['sum']:.8f}; the model's value" in out
    assert "Q[4][5] of '늘' (row 4), channel 5" in out
    assert f"sum = {page['neuron_cell']['sum']:.8f} (the model's" in out
    assert "Neuron 37 of layer 1 at '␣' (row 6)" in out
    for title in ("W_q of head 2: 24 × 8", "Step 3 · Q = X·W_q as the chapter writes it"):
        assert title in out
    for step in ("Step 10 · before", "Step 11 · the second norm", "Step 12 · up-projection"):
        assert step in out
    # What each part pushes: the total beside the model's logit.
    attribution = page["attribution"]
    label = attribution["label"]
    assert f"What each part pushes on the logit of {label!r} at position 9" in out
    assert f"sum of the pushes            {attribution['total']:+.4f}" in out
    assert f"the model's logit: {attribution['logit']:+.4f}" in out
    assert "frozen norm" in out


def test_steps_take_the_block_switches_and_refuse_what_they_cannot(checkpoint, capsys):
    _, path = checkpoint
    argv = ["--checkpoint", str(path), "--prompt", "To be", "--device", "cpu"]
    switch = ["--steps", "--switches", "zero_neuron", "--neuron", "3", "--neuron-cell", "4,3"]
    assert explore_attention.main([*argv, *switch]) == 0
    out = capsys.readouterr().out
    assert "WHAT-IF, not what the model computes: layer 1: one MLP neuron's activation" in out
    assert "writes nothing (neuron 3)" in out
    assert "the what-if sets this neuron's output (or the MLP's) to 0" in out
    assert "Per word" in out  # "To be" has a space

    def fails(*extra) -> str:
        assert explore_attention.main([*argv, *extra]) == 2
        return capsys.readouterr().err

    assert "--cell is for the --steps tables: add --steps" in fails("--cell", "q,0,0")
    assert "the cell must be in rows 0..4" in fails("--steps", "--cell", "q,5,0")
    assert "neuron must be a whole number in 0..95" in fails("--steps", "--switches", "zero_neuron")
    assert 'a neuron is for the switch "zero_neuron"' in fails("--steps", "--neuron", "2")
