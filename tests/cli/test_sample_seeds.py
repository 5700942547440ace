"""Sample i of a seed is the same text whatever --num-samples.

The first sample of ``--seed 7`` changed with ``--num-samples`` (one generator drew for
the whole batch, row after row), though the README says the same seed gives the same
text. Each sample now draws from its own generator, seeded from the seed and its index.
"""

import torch

import sample
from model.engine import generate
from model.sampling import Sampling, sample_seed
from tests.conftest import sharp_model

SEPARATOR = "\n" + "-" * 40 + "\n"


def _samples(capsys, folder, n: int, *more) -> list[str]:
    args = ["--out-dir", str(folder), "--device", "cpu", "--prompt", "a", "--seed", "7"]
    assert sample.main([*args, "--max-new-tokens", "60", "--num-samples", str(n), *more]) == 0
    return capsys.readouterr().out.split(SEPARATOR)


def test_sample_i_is_the_same_text_whatever_the_number_of_samples(capsys, sample_run):
    one = _samples(capsys, sample_run, 1)
    three = _samples(capsys, sample_run, 3)
    five = _samples(capsys, sample_run, 5, "--no-stream")
    assert len(one) == 1 and len(three) == 3 and len(five) == 5
    assert three[0] == one[0] and five[:3] == three
    assert len(set(five)) == 5  # each its own text


def test_each_row_draws_from_its_own_seeded_generator():
    """The cached decoder (model.engine) and the reference loop (GPT.generate) give
    row i the tokens that a batch of one seeded with sample_seed(seed, i) gives."""
    model = sharp_model(vocab_size=12, seed=4, std=0.2)
    prompt = torch.tensor([[1, 2, 3]])
    batch = prompt.repeat(4, 1)
    rows = generate(model, batch, 13, Sampling(seed=-5))  # within block_size 16
    for i in range(4):
        alone = generate(model, prompt, 13, Sampling(seed=sample_seed(-5, i)))
        assert torch.equal(rows[i : i + 1], alone), i
    reference = torch.cat([batch, *model.uncached_stream(batch, 13, Sampling(seed=-5))], 1)
    assert torch.equal(reference, rows)
    assert sample_seed(-5, 0) == -5 and sample_seed(7, 1) != sample_seed(8, 0)
