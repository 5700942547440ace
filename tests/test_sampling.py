"""Choosing the next token (model/sampling.py): temperature, top-k, top-p, seeds, and
the draw on the device against torch.multinomial."""

import pytest
import torch

from model.sampling import (
    Sampling,
    SamplingArgumentError,
    draw,
    make_generator,
    next_token,
    top_k_filter,
    top_p_filter,
)

# --- filters -------------------------------------------------------------------------

PROBS = torch.tensor([[0.5, 0.3, 0.15, 0.05]])


def kept(logits):
    return torch.isfinite(logits)[0].tolist()


@pytest.mark.parametrize(
    "p, expected",
    [
        (0.7, [True, True, False, False]),  # 0.5 < 0.7: the crossing token is kept
        (0.5, [True, False, False, False]),  # the first token alone reaches 0.5
        (0.81, [True, True, True, False]),
        (1e-9, [True, False, False, False]),  # the most likely token always stays
        (1.0, [True, True, True, True]),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(p, expected):
    assert kept(top_p_filter(PROBS.log(), p)) == expected
    order = torch.tensor([2, 0, 3, 1])  # the same distribution, shuffled
    shuffled = kept(top_p_filter(PROBS.log()[:, order], p))
    assert shuffled == [expected[i] for i in order.tolist()]


def test_top_k_keeps_k_and_clamps_to_the_vocabulary():
    assert kept(top_k_filter(PROBS.log(), 3)) == [True, True, True, False]
    assert kept(top_k_filter(PROBS.log(), 1)) == [True, False, False, False]
    assert kept(top_k_filter(PROBS.log(), 100)) == [True, True, True, True]


def test_sampling_with_top_p_draws_only_from_the_nucleus():
    logits = PROBS.log().repeat(4000, 1)
    tokens = next_token(logits, Sampling(top_p=0.7), torch.Generator().manual_seed(0))[:, 0]
    assert set(tokens.tolist()) == {0, 1}
    share = (tokens == 0).float().mean().item()
    assert abs(share - 0.5 / 0.8) < 0.03  # renormalised over the kept tokens


def test_tiny_temperature_is_greedy_not_nan():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    assert next_token(logits, Sampling(temperature=1e-30)).item() == 1


def test_bad_seeds_and_settings_name_their_argument():
    for seed in (2**64, -(2**63) - 1, 1.5):
        with pytest.raises(SamplingArgumentError, match="seed must be an integer") as e:
            make_generator(seed)
        assert e.value.argument == "seed"
    with pytest.raises(SamplingArgumentError) as e:
        Sampling(1.0, None, 2.0)
    assert e.value.argument == "top_p" and e.value.requirement.startswith("must be a number")


def test_the_draw_takes_the_ids_torch_multinomial_takes_with_the_same_generator():
    """`draw` (no read back to the host) picks what torch.multinomial picks, so a seed
    gives the text it gave before the sampler moved onto the device."""
    probs = torch.softmax(3 * torch.randn(8, 65, generator=torch.Generator().manual_seed(0)), -1)
    ours, theirs = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    drawn = torch.cat([draw(probs, ours) for _ in range(50)], 1)
    expected = torch.cat([torch.multinomial(probs, 1, generator=theirs) for _ in range(50)], 1)
    assert torch.equal(drawn, expected)
    assert len(set(drawn[0].tolist())) > 3  # real draws, not one constant id
