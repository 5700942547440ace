"""Head scores (viz.head_scores) on hand-built attention patterns, and the lines that
say when a head formed."""

import math

import pytest
import torch

from viz.head_scores import (
    first_position_score,
    formation_lines,
    induction_ids,
    induction_score,
    previous_char_score,
    row_entropy,
    scores_from_weights,
)


def previous_char_head(T: int) -> torch.Tensor:
    """(T, T): row 0 on itself, every later row all on the character before."""
    w = torch.zeros(T, T)
    w[0, 0] = 1.0
    w[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return w


def uniform_head(T: int) -> torch.Tensor:
    """(T, T): row i spread evenly over characters 0..i."""
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1).unsqueeze(1)


def induction_head(period: int) -> torch.Tensor:
    """(2P, 2P): the first copy uniform, each row i of the second copy all on i - P + 1."""
    w = uniform_head(2 * period)
    rows = torch.arange(period, 2 * period)
    w[rows] = 0.0
    w[rows, rows - period + 1] = 1.0
    return w


def test_a_previous_character_head_scores_one():
    assert previous_char_score(previous_char_head(16)).item() >= 0.99
    assert first_position_score(previous_char_head(16)).item() == pytest.approx(1 / 15)


def test_uniform_weights_have_entropy_log_of_row_plus_one():
    entropy = row_entropy(uniform_head(10))
    expected = torch.tensor([math.log(i + 1) for i in range(10)])
    torch.testing.assert_close(entropy, expected)


def test_a_one_hot_head_has_zero_entropy():
    assert row_entropy(previous_char_head(8)).abs().max().item() == 0.0


def test_an_induction_pattern_scores_high_a_previous_character_head_low():
    period = 8
    assert induction_score(induction_head(period), period).item() == 1.0
    prev = induction_score(previous_char_head(2 * period), period).item()
    assert prev == 0.0
    # Uniform weights give row i 1 / (i + 1): rows 8..15 average about 0.08.
    uniform = induction_score(uniform_head(2 * period), period).item()
    assert uniform == pytest.approx(sum(1 / (i + 1) for i in range(8, 16)) / 8)


def test_first_position_head():
    w = torch.zeros(6, 6)
    w[:, 0] = 1.0
    assert first_position_score(w).item() == 1.0
    assert previous_char_score(w).item() == pytest.approx(1 / 5)  # row 1 only


def test_scores_from_weights_keeps_layers_and_heads_apart():
    text = torch.stack([previous_char_head(12), uniform_head(12)]).unsqueeze(0)  # (1, 2, T, T)
    repeat = torch.stack([previous_char_head(12), induction_head(6)]).unsqueeze(0)
    scores = scores_from_weights(text, repeat)
    assert scores["previous_char"].shape == (1, 2)
    assert scores["previous_char"][0, 0].item() == 1.0
    assert scores["induction"][0, 1].item() == 1.0
    assert scores["induction"][0, 0].item() == 0.0


def test_induction_ids_repeat_once_without_repeats_inside():
    ids = induction_ids(65, 16)
    assert ids.shape == (32,)
    assert torch.equal(ids[:16], ids[16:])
    assert len(set(ids[:16].tolist())) == 16
    assert torch.equal(ids, induction_ids(65, 16))  # fixed: the same at every call


def test_formation_lines_name_the_step_the_score_stayed_above_the_bound():
    history = {
        ("previous_char", 1, 2): [(1, 0.04), (100, 0.6), (200, 0.3), (340, 0.7), (500, 0.87)],
        ("previous_char", 0, 0): [(1, 0.04), (500, 0.1)],  # never formed
        ("first_position", 0, 1): [(1, 0.9), (500, 0.95)],  # was so from the start
        ("entropy", 0, 0): [(1, 3.0), (500, 0.5)],  # not a kind of head
    }
    assert formation_lines(history) == [
        "layer 1 head 2 became a previous-character head near step 340 "
        "(score 0.04 at step 1, 0.87 at step 500)"
    ]
