"""Choosing the next token (model/sampling.py): temperature, top-k, top-p, seeds, the
draw on the device against torch.multinomial, and the faults of a tiny temperature
and of a race that holds zeros."""

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


# Down to the smallest positive float: below float32's smallest normal number
# (1.2e-38), a temperature used to round to 0 in the division, and 0 / 0 gave NaN.
TINY_TEMPERATURES = [1e-30, 1e-38, 1e-45, 1e-50, 1e-300, 5e-324]


@pytest.mark.parametrize("temperature", TINY_TEMPERATURES)
def test_every_positive_temperature_however_tiny_is_greedy_not_nan(temperature):
    logits = torch.tensor([[1.0, 3.0, 2.0], [-4.0, -5.0, 100.0], [0.5, 0.25, 0.0]])
    for sampling in (
        Sampling(temperature),
        Sampling(temperature, top_k=2),
        Sampling(temperature, top_p=0.9),
    ):
        for seed in range(5):
            token = next_token(logits, sampling, torch.Generator().manual_seed(seed))
            assert token[:, 0].tolist() == [1, 2, 0]


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


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize(
    "sampling", [Sampling(top_k=1), Sampling(top_k=2), Sampling(top_p=0.5), Sampling(0.5, 1)]
)
def test_a_race_of_zeros_never_draws_a_filtered_token(monkeypatch, zero, sampling):
    """Some devices' generators can return 0 (pytorch#48841): a token that top-k or
    top-p removed (probability 0) must not be drawn then, though 0 / 0 is NaN."""
    logits = torch.tensor([[0.0, 1.0, 5.0, 4.9], [3.0, 0.0, 0.0, 0.0]])
    kept = {0: {2, 3} if sampling.top_k == 2 else {2}, 1: {0}}

    def zeros(self, *args, **kwargs):
        return self.fill_(zero)

    monkeypatch.setattr(torch.Tensor, "exponential_", zeros)
    token = next_token(logits, sampling, torch.Generator())
    assert token[0, 0].item() in kept[0] and token[1, 0].item() in kept[1]


def test_a_race_with_a_zero_for_one_token_draws_it_if_it_is_kept(monkeypatch):
    """E = 0 is the race's extreme: a kept token whose draw is 0 wins (p / 0 = inf),
    a filtered one never does."""
    probs = torch.tensor([[0.0, 0.3, 0.7], [0.0, 0.3, 0.7]])

    def race(self, *args, **kwargs):
        return self.copy_(torch.tensor([[0.0, 1.0, 1.0], [1.0, -0.0, 1.0]]))

    monkeypatch.setattr(torch.Tensor, "exponential_", race)
    assert draw(probs)[:, 0].tolist() == [2, 1]
