"""Each data-parallel rank draws its own dropout masks (it drew the same ones on every
rank: the global seed had no rank offset), from the same initial weights."""

import pytest
import torch

from tests.training.conftest import SHARES_DDP_JOB
from training.checkpoint import seed_rank_stream


@pytest.mark.slow  # torchrun
@SHARES_DDP_JOB
def test_two_ranks_drop_different_units(ddp_job):
    rank0 = torch.load(ddp_job / "dropout" / "dropout0.pt", weights_only=True)
    rank1 = torch.load(ddp_job / "dropout" / "dropout1.pt", weights_only=True)
    zeros0, zeros1 = rank0["zeros"], rank1["zeros"]  # (B, T, n_embd) booleans
    assert 0.4 < zeros0.float().mean() < 0.6 and 0.4 < zeros1.float().mean() < 0.6
    # Independent masks agree on about half the units; identical ones on all.
    assert (zeros0 == zeros1).float().mean() < 0.6
    for name in rank0["after"]:  # DDP still keeps the weights equal
        assert torch.equal(rank0["after"][name], rank1["after"][name]), name


def test_rank_0_keeps_the_single_process_stream_and_others_get_their_own():
    torch.manual_seed(1337)
    expected = torch.rand(4)
    torch.manual_seed(1337)
    seed_rank_stream(1337, 0)
    assert torch.equal(torch.rand(4), expected)
    draws = []
    for rank in (1, 2):
        seed_rank_stream(1337, rank)
        draws.append(torch.rand(4))
    # Not the stream of a batch sampler seeded seed + rank either.
    sampler_stream = torch.Generator().manual_seed(1337 + 1)
    assert not torch.equal(draws[0], torch.rand(4, generator=sampler_stream))
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], expected)
