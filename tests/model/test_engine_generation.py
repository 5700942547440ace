"""Generation (model/engine.py): KV-cache parity with the full forward pass and with
the uncached reference `GPT.generate`, the sliding window past block_size,
determinism, streaming, and argument checks.

The model runs on TEST_DEVICE (MINIGPT_TEST_DEVICE), in float32."""

import pytest
import torch

from model.engine import Engine, allocate_cache, generate, generate_stream, sliding_window_keep
from model.sampling import Sampling, SamplingArgumentError, make_generator
from tests.conftest import TEST_DEVICE, sharp_model

BLOCK = 16
VOCAB = 20


def make_model(block_size=BLOCK, vocab_size=VOCAB, seed=0, std=0.3):
    return sharp_model(vocab_size, block_size, seed, std, device=TEST_DEVICE)


def on_device(seed: int) -> torch.Generator:
    """A seeded generator on TEST_DEVICE, where the model samples."""
    return make_generator(seed, TEST_DEVICE)


def random_ids(shape, seed: int) -> torch.Tensor:
    """(B, T) token ids drawn on the CPU (the same on every device), moved to TEST_DEVICE."""
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(seed)).to(
        TEST_DEVICE
    )


def zeros(*shape) -> torch.Tensor:
    """A (B, T) prompt of token 0 on TEST_DEVICE."""
    return torch.zeros(*shape, dtype=torch.long, device=TEST_DEVICE)


@pytest.fixture(scope="module")
def model():
    return make_model()


# --- KV cache parity ---------------------------------------------------------------


def decode(engine, cache, token, position):
    """One engine decode step at an int position over (keys, values) of
    `allocate_cache`, compiled-style (the whole cache, masked): (B, vocab_size) logits."""
    where = torch.tensor([position], device=token.device)
    slots = torch.arange(cache[0].size(3), device=token.device)
    return engine.decode_step(token, where, *cache, slots)


@pytest.mark.parametrize("prompt_len", [1, 5, BLOCK - 1, BLOCK])
def test_cached_logits_equal_full_forward_at_every_step(model, prompt_len):
    idx = random_ids((3, BLOCK), seed=1)
    engine = Engine(model, compile=False)
    with torch.no_grad():
        cache = allocate_cache(model, batch_size=3)
        cached = engine.prefill(idx[:, :prompt_len], *cache)
        full, _ = model(idx[:, :prompt_len])
        worst = (cached - full[:, -1]).abs().max().item()
        for t in range(prompt_len, BLOCK):
            cached = decode(engine, cache, idx[:, t : t + 1], t)
            full, _ = model(idx[:, : t + 1])
            assert cached.shape == (3, VOCAB)
            worst = max(worst, (cached - full[:, -1]).abs().max().item())
    assert full.std().item() > 0.3  # logits vary by 1000s of times the tolerance
    assert worst <= 1e-4


ARCHITECTURES = [
    {"position": "learned"},
    {"position": "rope", "qk_norm": True, "norm": "rmsnorm", "activation": "relu2"},
]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_prefill_gives_the_last_logits_and_caches_every_position(architecture):
    """A prefill returns the last position's logits of the full forward and caches the
    keys and values a one-token-at-a-time decode writes."""
    model = sharp_model(VOCAB, BLOCK, device=TEST_DEVICE, **architecture)
    engine = Engine(model, compile=False)
    idx = random_ids((3, BLOCK), seed=4)
    with torch.no_grad():
        full, _ = model(idx)
        prefilled, stepped = (allocate_cache(model, batch_size=3) for _ in range(2))
        last = engine.prefill(idx[:, :13], *prefilled)
        engine.prefill(idx[:, :1], *stepped)
        for t in range(1, 13):
            decode(engine, stepped, idx[:, t : t + 1], t)
    assert full[:, 12].std().item() > 0.3  # logits vary by 1000s of times the tolerance
    torch.testing.assert_close(last, full[:, 12], atol=1e-5, rtol=1e-4)
    for a, b in zip(prefilled, stepped, strict=True):  # keys, then values
        assert a[:, :, :, 13:].abs().max() == 0  # nothing written past the prompt
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_the_cache_refuses_an_empty_batch():
    with pytest.raises(ValueError, match="batch_size must be positive"):
        allocate_cache(make_model(), batch_size=0)


def test_the_cache_is_not_part_of_the_state_dict():
    """Decoding leaves the model as it was: the same state_dict keys and values (a
    checkpoint saved after sampling loads into older code, and the other way round)."""
    model = make_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    generate(model, zeros(2, 3), 40, Sampling(seed=1))
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], v) for k, v in before.items())


# --- generation with and without the cache -------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": 1.0},
        {"temperature": 0.8, "top_k": 5},
        {"temperature": 1.2, "top_p": 0.9},
        {"temperature": 0},
    ],
)
@pytest.mark.parametrize("position", ["learned", "rope"])
def test_cache_gives_the_no_cache_tokens_inside_block_size(kwargs, position):
    model = sharp_model(VOCAB, BLOCK, device=TEST_DEVICE, position=position)
    prompt = random_ids((4, 3), seed=3)
    new = BLOCK + 1 - 3  # the last token is predicted from a full block_size context
    outs = [
        generate(model, prompt, new, Sampling(**kwargs, generator=on_device(9))),
        model.generate(prompt, new, **kwargs, generator=on_device(9)),
    ]
    assert outs[0].shape == (4, 3 + new)
    assert torch.equal(outs[0][:, :3], prompt)
    assert torch.equal(outs[0], outs[1])


def reference_sliding_window(model, prompt, new):
    """Greedy decoding of the documented strategy, without a cache: predict from the
    tokens in the window; when it holds block_size tokens, the next token joins the
    last keep - 1 of them."""
    block_size = model.config.block_size
    keep = sliding_window_keep(block_size)
    window = prompt[:, -block_size:]
    tokens = []
    with torch.no_grad():
        for _ in range(new):
            token = model(window)[0][:, -1].argmax(-1, keepdim=True)
            tokens.append(token)
            window = torch.cat([window, token], 1)
            if window.size(1) > block_size:
                window = window[:, -keep:]
    return torch.cat([prompt, *tokens], 1)


@pytest.mark.parametrize("block_size, prompt_len", [(16, 3), (16, 40), (5, 2), (1, 1)])
def test_sliding_window_past_block_size_follows_the_documented_strategy(block_size, prompt_len):
    model = make_model(block_size=block_size)
    prompt = random_ids((2, prompt_len), seed=4)
    new = 3 * block_size + 7
    greedy = generate(model, prompt, new, Sampling(temperature=0))
    assert torch.equal(greedy, reference_sliding_window(model, prompt, new))


def test_sliding_window_is_deterministic_with_a_seed(model):
    prompt = zeros(3, 2)

    def run(seed):
        return generate(model, prompt, 5 * BLOCK, Sampling(top_k=10, top_p=0.95, seed=seed))

    a, b, c = run(1), run(1), run(2)
    assert a.shape == (3, 2 + 5 * BLOCK)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_greedy_is_deterministic_and_uses_no_randomness(model):
    prompt = torch.tensor([[1, 2, 3]], device=TEST_DEVICE)
    a = generate(model, prompt, 30, Sampling(temperature=0, generator=on_device(1)))
    b = generate(model, prompt, 30, Sampling(temperature=0, generator=on_device(2)))
    assert torch.equal(a, b)
    assert len(set(a[0, 3:].tolist())) > 1  # not a degenerate constant output


def test_stream_yields_the_steps_of_generate(model):
    prompt = torch.tensor([[1, 2], [3, 4]], device=TEST_DEVICE)
    steps = list(generate_stream(model, prompt, 25, Sampling(generator=on_device(5))))
    assert len(steps) == 25 and all(s.shape == (2, 1) for s in steps)
    whole = generate(model, prompt, 25, Sampling(generator=on_device(5)))
    assert torch.equal(torch.cat([prompt, *steps], 1), whole)
    steps[0][0, 0] = 0  # ordinary tensors, not read-only inference tensors
    assert generate(model, prompt, 0).shape == (2, 2)
    # The uncached reference streams its tokens the same way (inside block_size).
    reference = model.uncached_stream(prompt, BLOCK - 1, Sampling(generator=on_device(5)))
    assert torch.equal(torch.cat([prompt, *reference], 1), whole[:, : 1 + BLOCK])


# --- argument checks -----------------------------------------------------------------

BAD_ARGUMENTS = [
    ({"temperature": -1.0}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_k": 0}, "top_k"),
    ({"top_k": -3}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": -0.1}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_p": float("nan")}, "top_p"),
    ({"max_new_tokens": -1}, "max_new_tokens"),
    ({"max_new_tokens": 2.5}, "max_new_tokens"),
    ({"generator": "seed 1"}, "generator"),
]


@pytest.mark.parametrize("kwargs, message", BAD_ARGUMENTS)
def test_bad_arguments_are_named_before_any_model_work(monkeypatch, kwargs, message):
    """The uncached reference and the engine refuse a bad setting before the model
    runs, the streams on the call itself rather than on iteration."""
    model = make_model()

    def no_model_work(*args, **kw):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(model, "forward", no_model_work)
    args = {"max_new_tokens": 3, **kwargs}
    prompt = zeros(1, 1)
    with pytest.raises(ValueError, match=message):
        model.generate(prompt, **args)
    new = args.pop("max_new_tokens")
    with pytest.raises(ValueError, match=message):
        generate_stream(model, prompt, new, Sampling(**args))
    with pytest.raises(ValueError, match=message):
        model.uncached_stream(prompt, new, Sampling(**args))


def test_every_bad_setting_is_named_at_once():
    with pytest.raises(SamplingArgumentError) as e:
        Sampling(temperature=-1, top_k=0, top_p=2.0, seed=2**64)
    assert [argument for argument, _ in e.value.problems] == [
        "temperature",
        "top_k",
        "top_p",
        "seed",
    ]
    assert str(e.value).startswith("temperature must be a finite number >= 0")
    with pytest.raises(SamplingArgumentError, match="seed and generator both given"):
        Sampling(seed=1, generator=torch.Generator())


def test_a_seed_gives_each_generation_its_own_generator_a_generator_is_shared():
    model = make_model()
    prompt = zeros(1, 1)  # one row: a seed's row 0 draws as a generator seeded with it
    seeded = Sampling(top_k=5, seed=3)
    first = generate(model, prompt, 12, seeded)
    assert torch.equal(generate(model, prompt, 12, seeded), first)
    assert torch.equal(model.generate(prompt, 12, top_k=5, generator=on_device(3)), first)
    shared = Sampling(top_k=5, generator=on_device(3))
    assert torch.equal(generate(model, prompt, 12, shared), first)
    assert not torch.equal(generate(model, prompt, 12, shared), first)  # drawn further


def test_empty_prompt_is_rejected(model):
    with pytest.raises(ValueError, match="prompt"):
        model.generate(zeros(1, 0), 3)
    with pytest.raises(ValueError, match="prompt"):
        generate(model, zeros(0, 2), 3)


def test_rolling_cache_of_a_one_layer_rope_model_equals_rerunning_the_window():
    """Past block_size a RoPE model's cache rolls (no prefill again). With one layer a
    key depends only on its token and, through its rotation, on its distance to the
    query, so each step must give exactly the logits of running the last block_size
    tokens from scratch, and greedy decoding the tokens of the uncached reference."""
    model = sharp_model(20, 8, n_layer=1, n_embd=16, position="rope", device=TEST_DEVICE)
    engine = Engine(model, compile=False)
    tokens = torch.randint(0, 20, (2, 40)).to(TEST_DEVICE)
    with torch.inference_mode():
        cache = allocate_cache(model, 2)
        engine.prefill(tokens[:, :8], *cache)
        for t in range(8, 40):  # positions up to 5 windows past the rotary table
            logits = decode(engine, cache, tokens[:, t : t + 1], t)
            window, _ = model(tokens[:, t - 7 : t + 1])
            torch.testing.assert_close(logits, window[:, -1], atol=1e-5, rtol=1e-4)
    prompt = tokens[:, :3]
    cached = generate(model, prompt, 40, Sampling(temperature=0))
    assert torch.equal(cached, model.generate(prompt, 40, temperature=0))


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_generation_past_block_size_rolls_or_refills(position, monkeypatch):
    """After the prompt, a RoPE model runs one token per forward pass at any length;
    a learned-position model also refills 3/4 of its window each time it is full."""
    model = sharp_model(VOCAB, 8, position=position)
    widths = []
    real_prefill, real_step = Engine.prefill, Engine.decode_step

    def counting_prefill(self, idx, *cache):
        widths.append(idx.size(1))
        return real_prefill(self, idx, *cache)

    def counting_step(self, token, *args):
        widths.append(token.size(1))
        return real_step(self, token, *args)

    monkeypatch.setattr(Engine, "prefill", counting_prefill)
    monkeypatch.setattr(Engine, "decode_step", counting_step)
    out = generate(model, torch.zeros(1, 3, dtype=torch.long), 30, Sampling(seed=1))
    assert out.shape == (1, 33)
    refills = {1} if position == "rope" else {1, sliding_window_keep(8)}
    assert widths[0] == 3 and set(widths[1:]) == refills, widths


def test_the_reference_takes_the_sampling_settings_as_they_are_named():
    """`GPT.generate`'s settings are `Sampling`'s fields (a generator, not a seed), with
    its defaults: the two cannot drift apart."""
    import dataclasses
    import inspect

    from model.gpt import GPT

    method = list(inspect.signature(GPT.generate).parameters.values())[3:]
    fields = {f.name: f.default for f in dataclasses.fields(Sampling)}
    assert [p.name for p in method] == ["temperature", "top_k", "top_p", "generator"]
    assert all(p.default == fields[p.name] for p in method)
