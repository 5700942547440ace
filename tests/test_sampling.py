"""Sampling: KV cache parity, the sliding window past block_size, the filters, stop
sequences, argument checks, and sample.py (streaming, batches, closed pipes)."""

import dataclasses
import io
import math
import runpy
import subprocess
import sys

import pytest
import torch

import sample
from conftest import ROOT
from model import GPT, GPTConfig
from model.generation import (
    SamplingError,
    StopSequences,
    make_generator,
    next_token,
    sliding_window_keep,
    top_k_filter,
    top_p_filter,
    validate_sampling_args,
)
from model.kv_cache import KVCache
from training.checkpoint import save_checkpoint

BLOCK = 16
VOCAB = 20
SEPARATOR = "\n" + "-" * 40 + "\n"


def make_model(block_size=BLOCK, vocab_size=VOCAB, seed=0, std=0.3):
    """A small GPT with weights far larger than GPT-2's initial ones: attention is then
    peaked and logits spread over several units, so a wrong key, value or position
    moves the logits well beyond the 1e-4 tolerance."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size, block_size, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


@pytest.fixture(scope="module")
def model():
    return make_model()


# --- KV cache parity ---------------------------------------------------------------


@pytest.mark.parametrize("prompt_len", [1, 5, BLOCK - 1, BLOCK])
def test_cached_logits_equal_full_forward_at_every_step(model, prompt_len):
    torch.manual_seed(1)
    idx = torch.randint(0, VOCAB, (3, BLOCK))
    worst = 0.0
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=3)
        cached, _ = model(idx[:, :prompt_len], cache=cache)
        full, _ = model(idx[:, :prompt_len])
        worst = (cached - full).abs().max().item()
        for t in range(prompt_len, BLOCK):
            cached, _ = model(idx[:, t : t + 1], cache=cache)
            full, _ = model(idx[:, : t + 1])
            assert cached.shape == (3, 1, VOCAB)
            worst = max(worst, (cached[:, -1] - full[:, -1]).abs().max().item())
    assert cache.length == BLOCK
    assert full.std().item() > 0.3  # logits vary by 1000s of times the tolerance
    assert worst <= 1e-4


def test_chunked_prefill_after_cached_positions_is_causal(model):
    """Several new positions after cached ones (the bottom-right causal mask)."""
    torch.manual_seed(2)
    idx = torch.randint(0, VOCAB, (2, BLOCK))
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=2)
        model(idx[:, :4], cache=cache)
        chunk, _ = model(idx[:, 4:11], cache=cache)
        full, _ = model(idx[:, :11])
    assert (chunk - full[:, 4:11]).abs().max().item() <= 1e-4


def test_cache_refuses_overflow_attention_weights_and_autograd(model):
    idx = torch.zeros(1, 10, dtype=torch.long)
    with torch.no_grad():
        cache = KVCache.for_model(model, batch_size=1)
        model(idx, cache=cache)
        with pytest.raises(ValueError, match="block_size"):
            model(idx, cache=cache)  # 10 + 10 > 16
        with pytest.raises(ValueError, match="return_attention"):
            model(idx[:, :1], return_attention=True, cache=cache)
    with pytest.raises(RuntimeError, match="inference"):
        model(idx, cache=KVCache.for_model(model, batch_size=1))


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
def test_cache_gives_the_no_cache_tokens_inside_block_size(model, kwargs):
    prompt = torch.randint(0, VOCAB, (4, 3), generator=torch.Generator().manual_seed(3))
    new = BLOCK + 1 - 3  # the last token is predicted from a full block_size context
    outs = [
        model.generate(
            prompt, new, **kwargs, generator=torch.Generator().manual_seed(9), use_cache=c
        )
        for c in (True, False)
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
    prompt = torch.randint(0, VOCAB, (2, prompt_len), generator=torch.Generator().manual_seed(4))
    new = 3 * block_size + 7
    greedy = model.generate(prompt, new, temperature=0)
    assert torch.equal(greedy, reference_sliding_window(model, prompt, new))


def test_sliding_window_is_deterministic_with_a_seed(model):
    prompt = torch.zeros(3, 2, dtype=torch.long)

    def run(seed):
        gen = torch.Generator().manual_seed(seed)
        return model.generate(prompt, 5 * BLOCK, top_k=10, top_p=0.95, generator=gen)

    a, b, c = run(1), run(1), run(2)
    assert a.shape == (3, 2 + 5 * BLOCK)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_greedy_is_deterministic_and_uses_no_randomness(model):
    prompt = torch.tensor([[1, 2, 3]])
    a = model.generate(prompt, 30, temperature=0, generator=torch.Generator().manual_seed(1))
    b = model.generate(prompt, 30, temperature=0, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b)
    assert len(set(a[0, 3:].tolist())) > 1  # not a degenerate constant output


def test_stream_yields_the_steps_of_generate(model):
    prompt = torch.tensor([[1, 2], [3, 4]])
    steps = list(model.generate_stream(prompt, 25, generator=torch.Generator().manual_seed(5)))
    assert len(steps) == 25 and all(s.shape == (2, 1) for s in steps)
    whole = model.generate(prompt, 25, generator=torch.Generator().manual_seed(5))
    assert torch.equal(torch.cat([prompt, *steps], 1), whole)
    steps[0][0, 0] = 0  # ordinary tensors, not read-only inference tensors
    assert model.generate(prompt, 0).shape == (2, 2)


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
    tokens = next_token(logits, top_p=0.7, generator=torch.Generator().manual_seed(0))[:, 0]
    assert set(tokens.tolist()) == {0, 1}
    share = (tokens == 0).float().mean().item()
    assert abs(share - 0.5 / 0.8) < 0.03  # renormalised over the kept tokens


def test_tiny_temperature_is_greedy_not_nan():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    assert next_token(logits, temperature=1e-30).item() == 1


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
    model = make_model()

    def no_model_work(*args, **kw):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(model, "forward", no_model_work)
    args = {"max_new_tokens": 3, **kwargs}
    prompt = torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(ValueError, match=message):
        model.generate_stream(prompt, **args)  # raises on the call, not on iteration
    with pytest.raises(ValueError, match=message):
        model.generate(prompt, **args)


def test_empty_prompt_and_bad_seeds_are_rejected(model):
    with pytest.raises(ValueError, match="prompt"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), 3)
    for seed in (2**64, -(2**63) - 1, 1.5):
        with pytest.raises(ValueError, match="seed"):
            make_generator(seed)
    with pytest.raises(ValueError, match="--top-p"):
        validate_sampling_args(3, 1.0, None, 2.0, flag_names=True)


# --- stop sequences ------------------------------------------------------------------


def feed(stops, rows):
    """Push rows of tokens (one list per sequence, equal lengths) and collect output."""
    out = [[] for _ in rows]
    for step in zip(*rows, strict=True):
        for row, ids in enumerate(stops.push(step)):
            out[row] += ids
    for row, ids in enumerate(stops.flush()):
        out[row] += ids
    return out


def test_stop_sequence_ends_each_row_on_its_own():
    stops = StopSequences([[1, 2]], batch_size=3)
    out = feed(stops, [[5, 1, 3, 1, 2, 7], [1, 2, 9, 9, 9, 9], [4, 4, 4, 4, 4, 1]])
    assert out == [[5, 1, 3], [], [4, 4, 4, 4, 4, 1]]  # row 3: held 1 released at the end
    assert stops.finished == [True, True, False] and not stops.all_finished


def test_stop_prefix_is_held_back_until_it_cannot_match():
    stops = StopSequences([[1, 1, 2]], batch_size=1)
    assert stops.push([1]) == [[]]
    assert stops.push([1]) == [[]]
    assert stops.push([1]) == [[1]]  # "1 1 1": only the first 1 can no longer start a match
    assert stops.push([2]) == [[]] and stops.finished == [True]
    assert stops.push([5]) == [[]]  # finished rows ignore further tokens


def test_longest_of_simultaneous_stops_is_removed():
    assert feed(StopSequences([[2], [1, 2]], 1), [[3, 1, 2, 4]]) == [[3]]
    with pytest.raises(ValueError, match="stop"):
        StopSequences([[]], 1)


def test_unescape_understands_escapes_and_keeps_non_ascii():
    assert sample.unescape(r"\n\n") == "\n\n"
    assert sample.unescape(r"하늘\n") == "하늘\n"
    assert sample.unescape(r"\t\\\x41\u00e9\U0001F600") == "\t\\Aé\U0001f600"
    assert sample.unescape(r"a\q") == r"a\q"
    assert sample.unescape("새가") == "새가"


# --- sample.py -----------------------------------------------------------------------

CHARS = list("\n abc새가하늘을")


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A hand-built checkpoint: random weights over a small vocabulary that includes
    newline and Korean characters."""
    model = make_model(vocab_size=len(CHARS), seed=5, std=0.2)
    folder = tmp_path_factory.mktemp("run")
    payload = {
        "model": model.state_dict(),
        "model_config": dataclasses.asdict(model.config),
        "vocab": sorted(CHARS),
    }
    save_checkpoint(payload, folder / "ckpt.pt")
    return folder


def run_main(capsys, folder, *args):
    code = sample.main(["--out-dir", str(folder), "--device", "cpu", *args])
    out, err = capsys.readouterr()
    return code, out, err


def samples_of(out):
    """Split sample.py's output into its samples (each is printed with a newline)."""
    parts = out.split(SEPARATOR)
    assert all(p.endswith("\n") for p in parts)
    return [p[:-1] for p in parts]


def truncate_at(text, prompt, stop):
    """The prompt, then the generated text up to the first stop (which is dropped)."""
    generated = text[len(prompt) :]
    cut = generated.find(stop)
    return prompt + (generated if cut < 0 else generated[:cut])


def test_cli_stream_prints_the_same_text_as_no_stream(capsys, checkpoint_dir):
    common = ["--prompt", "ab", "--max-new-tokens", "80", "--seed", "3"]
    for extra in ([], ["--stop", "a b", "--top-p", "0.9"]):
        _, streamed, _ = run_main(capsys, checkpoint_dir, *common, *extra, "--stream")
        code, whole, err = run_main(capsys, checkpoint_dir, *common, *extra, "--no-stream")
        assert code == 0, err
        assert streamed == whole and whole.startswith("ab")
    assert len(samples_of(run_main(capsys, checkpoint_dir, *common)[1])[0]) == 2 + 80


def test_cli_stream_writes_while_generating(monkeypatch, checkpoint_dir):
    events = []
    original = GPT.generate_stream

    def spy(self, *args, **kwargs):
        for step in original(self, *args, **kwargs):
            events.append("step")
            yield step

    class Recorder(io.StringIO):
        def write(self, text):
            events.append("write")
            return super().write(text)

    monkeypatch.setattr(GPT, "generate_stream", spy)
    monkeypatch.setattr(sys, "stdout", Recorder())
    args = ["--out-dir", str(checkpoint_dir), "--device", "cpu", "--max-new-tokens", "5"]
    assert sample.main([*args, "--prompt", "a"]) == 0
    assert events == ["write"] + ["step", "write"] * 5 + ["write"]  # prompt, chars, "\n"


def test_cli_stop_sequences_end_each_sample_of_a_batch(capsys, checkpoint_dir):
    common = ["--prompt", "새", "--max-new-tokens", "150", "--num-samples", "4", "--seed", "1"]
    code, out, err = run_main(capsys, checkpoint_dir, *common)
    assert code == 0, err
    free = samples_of(out)
    assert len(free) == 4 and all(len(s) == 151 for s in free)
    for stop, argument in (("\n\n", r"\n\n"), ("하늘", "하늘"), ("a\n", r"a\n")):
        expected = [truncate_at(s, "새", stop) for s in free]
        assert any(e != s for e, s in zip(expected, free, strict=True))  # a stop occurred
        code, out, err = run_main(capsys, checkpoint_dir, *common, "--stop", argument)
        assert code == 0, err
        assert samples_of(out) == expected
    # Two stops: each sample ends at whichever comes first.
    code, out, _ = run_main(capsys, checkpoint_dir, *common, "--stop", "하늘", "--stop", "ab")
    first = [min(truncate_at(s, "새", "하늘"), truncate_at(s, "새", "ab"), key=len) for s in free]
    assert samples_of(out) == first


def test_cli_prompt_file_is_read_as_utf8(capsys, checkpoint_dir, tmp_path):
    good = tmp_path / "prompt.txt"
    good.write_bytes("\ufeff하늘을\r\nab".encode())
    code, out, err = run_main(capsys, checkpoint_dir, "--prompt-file", str(good))
    assert code == 0, err
    assert out.startswith("하늘을\nab")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ab\xff")
    code, _, err = run_main(capsys, checkpoint_dir, "--prompt-file", str(bad))
    assert code == 2 and "--prompt-file" in err and "byte offset 2" in err
    code, _, err = run_main(capsys, checkpoint_dir, "--prompt-file", str(tmp_path / "none"))
    assert code == 2 and "--prompt-file" in err
    with pytest.raises(SystemExit) as exit_info:
        sample.main(["--prompt", "a", "--prompt-file", str(good)])
    assert exit_info.value.code == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--temperature", "-1"], "--temperature"),
        (["--top-k", "0"], "--top-k"),
        (["--top-p", "0"], "--top-p"),
        (["--top-p", "1.5"], "--top-p"),
        (["--top-p", "nan"], "--top-p"),
        (["--max-new-tokens", "-1"], "--max-new-tokens"),
        (["--num-samples", "0"], "--num-samples"),
        (["--seed", str(2**64)], "--seed"),
        (["--stop", ""], "--stop"),
        (["--stop", r"\U00110000"], "--stop"),
        (["--stream", "--num-samples", "2"], "--stream"),
    ],
)
def test_cli_bad_arguments_are_named_before_loading(capsys, tmp_path, args, message):
    code, out, err = run_main(capsys, tmp_path / "no_such_run", *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err
    assert "checkpoint" not in err and "Traceback" not in err


def test_cli_stop_with_unknown_characters_is_an_error(capsys, checkpoint_dir):
    code, _, err = run_main(capsys, checkpoint_dir, "--stop", "xa")
    assert code == 2 and "--stop" in err and "'x' (U+0078) at position 0" in err


@pytest.mark.parametrize("stream", [True, False])
def test_cli_closed_pipe_ends_quietly(checkpoint_dir, stream):
    cmd = [sys.executable, str(ROOT / "sample.py"), "--out-dir", str(checkpoint_dir)]
    cmd += ["--device", "cpu", "--prompt", "a"]
    if stream:  # `| head -c 20`: the reader leaves while characters are being streamed
        cmd += ["--max-new-tokens", "1000000"]
    else:  # the reader is gone before the batch is printed
        cmd += ["--max-new-tokens", "50", "--num-samples", "3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    if stream:
        assert len(proc.stdout.read(20)) == 20
    proc.stdout.close()
    code = proc.wait(timeout=60)  # a million characters would take far longer
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert code == 0 and err == ""


# --- benchmark script ----------------------------------------------------------------


def test_benchmark_script_runs_and_prints_a_table(capsys):
    bench = runpy.run_path(str(ROOT / "bench" / "sample_speed.py"), run_name="bench")
    bench["main"](["--models", "cpu", "--batch-sizes", "1,2", "--new-tokens", "3"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 4 layers")]
    assert len(rows) == 2
    for row in rows:
        speedup = row.split("|")[-2].strip()
        assert speedup.endswith("x") and math.isfinite(float(speedup[:-1]))


def multinomial_returning(vocab_size):
    """A stand-in for torch.multinomial that returns an id outside the vocabulary, as
    some backends do."""

    def draw(probs, num_samples, generator=None):
        return torch.full((probs.size(0), num_samples), vocab_size, dtype=torch.long)

    return draw


def test_out_of_vocabulary_draw_is_named_where_it_is_drawn(model, monkeypatch):
    monkeypatch.setattr(torch, "multinomial", multinomial_returning(VOCAB))
    prompt = torch.zeros(2, 3, dtype=torch.long)
    for use_cache in (True, False):
        with pytest.raises(SamplingError, match=f"token id {VOCAB}, outside the vocabulary"):
            model.generate(prompt, 5, temperature=1.0, use_cache=use_cache)
    # Greedy decoding draws nothing and is unaffected.
    assert model.generate(prompt, 5, temperature=0).shape == (2, 8)


def test_cli_reports_an_out_of_vocabulary_draw(capsys, checkpoint_dir, monkeypatch):
    monkeypatch.setattr(torch, "multinomial", multinomial_returning(len(CHARS)))
    code, _, err = run_main(capsys, checkpoint_dir, "--prompt", "ab", "--max-new-tokens", "3")
    assert code == 1
    assert f"error: the sampler drew token id {len(CHARS)}, outside the vocabulary" in err
    assert "Traceback" not in err
