"""The per-word tables (viz/word_tables.py): the chapters' words from the model's
characters, by a rule a learner can check by hand."""

import pytest
import torch

from tests.viz.conftest import PROMPT, ids_of
from tests.viz.conftest import sharp_model as sharp_gpt2
from viz.attention_steps import record_forward, xx_scores
from viz.word_tables import word_rows, word_spans, word_weights, words_json


def test_spaces_join_the_word_before_them():
    assert word_spans("새가 하늘을 날았다") == [(0, 3), (3, 7), (7, 10)]
    assert word_spans("새가") == [(0, 2)]
    assert word_spans("  a b") == [(0, 4), (4, 5)]  # leading spaces: the first word
    assert word_spans("a  b ") == [(0, 3), (3, 5)]
    assert word_spans(" ") == [(0, 1)]
    with pytest.raises(ValueError, match="at least one character"):
        word_spans("")


def test_a_hand_computed_table():
    # "ab c": words "ab␣" (characters 0, 1, 2) and "c" (3).
    weights = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.5, 0.5, 0.0, 0.0],
            [0.2, 0.3, 0.5, 0.0],
            [0.1, 0.2, 0.3, 0.4],
        ],
        dtype=torch.float64,
    )
    spans = word_spans("ab c")
    per_word = word_weights(weights, spans)
    # Row "ab␣": the mean of rows 0..2; its column "ab␣" sums columns 0..2.
    #   to "ab␣": (1 + 1 + 1) / 3 = 1; to "c": 0.
    # Row "c": row 3; to "ab␣": 0.1 + 0.2 + 0.3 = 0.6; to "c": 0.4.
    expected = torch.tensor([[1.0, 0.0], [0.6, 0.4]], dtype=torch.float64)
    torch.testing.assert_close(per_word, expected, atol=1e-12, rtol=0)
    values = torch.tensor([[3.0, 0.0], [0.0, 3.0], [3.0, 3.0], [1.0, 2.0]])
    torch.testing.assert_close(
        word_rows(values, spans), torch.tensor([[2.0, 2.0], [1.0, 2.0]], dtype=torch.float64)
    )
    with pytest.raises(ValueError, match=r"weights must be \(4, 4\)"):
        word_weights(weights[:3], spans)


def test_the_models_tables_per_word_keep_rows_summing_to_one():
    model = sharp_gpt2()
    record = record_forward(model, ids_of(PROMPT))
    kept = record.layers[1]
    x = kept["x"][0]
    xx_weights = xx_scores(x)[1]
    answer = words_json(
        PROMPT,
        {"weights": kept["weights"][0, 2], "xx_weights": xx_weights},
        {"xx_out": xx_weights @ x},
    )
    assert answer["words"] == ["새가 ", "하늘을 ", "날았다"]
    assert answer["spans"] == [[0, 3], [3, 7], [7, 10]]
    tables = answer["tables"]
    for name in ("weights", "xx_weights"):
        table = tables[name]
        assert table.shape == (3, 3)
        torch.testing.assert_close(table.sum(-1), torch.ones(3, dtype=torch.float64))
        assert table[0, 1] == 0 and table[0, 2] == 0 and table[1, 2] == 0  # causal
    # "하늘을␣" (characters 3..6) attending to "새가␣" (0..2), summed and averaged.
    weights = kept["weights"][0, 2].double()
    by_hand = sum(weights[i, j] for i in range(3, 7) for j in range(0, 3)) / 4
    torch.testing.assert_close(tables["weights"][1, 0], by_hand, atol=1e-12, rtol=0)
    assert tables["xx_out"].shape == (3, model.config.n_embd)
    torch.testing.assert_close(tables["xx_out"][2], (xx_weights @ x)[7:].double().mean(0))
