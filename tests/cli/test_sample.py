"""sample.py: streaming, batches with stop strings, prompt files, argument errors named
as flags, closed pipes, unknown characters, consoles that cannot print Korean."""

import io
import subprocess
import sys

import pytest
import torch

import sample
from model.engine import CHUNK
from tests.cli.conftest import hand_made_run
from tests.conftest import ROOT

SEPARATOR = "\n" + "-" * 40 + "\n"

# --- sample.py -----------------------------------------------------------------------


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


def test_cli_stream_prints_the_same_text_as_no_stream(capsys, sample_run):
    common = ["--prompt", "ab", "--max-new-tokens", "80", "--seed", "3"]
    for extra in ([], ["--stop", "a b", "--top-p", "0.9"]):
        _, streamed, _ = run_main(capsys, sample_run, *common, *extra, "--stream")
        code, whole, err = run_main(capsys, sample_run, *common, *extra, "--no-stream")
        assert code == 0, err
        assert streamed == whole and whole.startswith("ab")
    assert len(samples_of(run_main(capsys, sample_run, *common)[1])[0]) == 2 + 80


def test_cli_stream_writes_while_generating(monkeypatch, sample_run):
    """Each chunk of tokens read back from the engine is written before the next one is
    generated (model/engine.py's CHUNK tokens at a time)."""
    events = []
    original = sample.read_in_chunks

    def spy(*args, **kwargs):
        for chunk in original(*args, **kwargs):
            events.append("chunk")
            yield chunk

    class Recorder(io.StringIO):
        def write(self, text):
            events.append("write")
            return super().write(text)

    monkeypatch.setattr(sample, "read_in_chunks", spy)
    monkeypatch.setattr(sys, "stdout", Recorder())
    args = ["--out-dir", str(sample_run), "--device", "cpu", "--max-new-tokens", "40"]
    assert sample.main([*args, "--prompt", "a"]) == 0
    chunk = ["chunk"] + ["write"] * CHUNK
    assert events == ["write"] + chunk * 2 + ["chunk"] + ["write"] * (40 - 2 * CHUNK) + ["write"]


def test_cli_stop_sequences_end_each_sample_of_a_batch(capsys, sample_run):
    common = ["--prompt", "새", "--max-new-tokens", "150", "--num-samples", "4", "--seed", "1"]
    code, out, err = run_main(capsys, sample_run, *common)
    assert code == 0, err
    free = samples_of(out)
    assert len(free) == 4 and all(len(s) == 151 for s in free)
    for stop, argument in (("\n\n", r"\n\n"), ("하늘", "하늘"), ("a\n", r"a\n")):
        expected = [truncate_at(s, "새", stop) for s in free]
        assert any(e != s for e, s in zip(expected, free, strict=True))  # a stop occurred
        code, out, err = run_main(capsys, sample_run, *common, "--stop", argument)
        assert code == 0, err
        assert samples_of(out) == expected
    # Two stops: each sample ends at whichever comes first.
    code, out, _ = run_main(capsys, sample_run, *common, "--stop", "하늘", "--stop", "ab")
    first = [min(truncate_at(s, "새", "하늘"), truncate_at(s, "새", "ab"), key=len) for s in free]
    assert samples_of(out) == first


def test_cli_prompt_file_is_read_as_utf8(capsys, sample_run, tmp_path):
    good = tmp_path / "prompt.txt"
    good.write_bytes("\ufeff하늘을\r\nab".encode())
    code, out, err = run_main(capsys, sample_run, "--prompt-file", str(good))
    assert code == 0, err
    assert out.startswith("하늘을\nab")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ab\xff")
    code, _, err = run_main(capsys, sample_run, "--prompt-file", str(bad))
    assert code == 2 and "--prompt-file" in err and "byte offset 2" in err
    code, _, err = run_main(capsys, sample_run, "--prompt-file", str(tmp_path / "none"))
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


def test_cli_reports_every_bad_flag_at_once(capsys, tmp_path):
    """As train.py lists every configuration error, sample.py lists every bad flag."""
    bad = ["--top-k", "0", "--top-p", "1.5", "--temperature", "-1", "--num-samples", "0"]
    bad += ["--max-new-tokens", "-2", "--stop", "", "--prompt", r"a\u12", "--device", "tpu"]
    code, out, err = run_main(capsys, tmp_path / "no_such_run", *bad)
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == "error: 8 bad arguments:"
    flags = ["--temperature", "--top-k", "--top-p", "--max-new-tokens", "--num-samples"]
    flags += ["--prompt", "--stop", "--device"]
    assert [line.split()[1].rstrip(":") for line in lines[1:]] == flags
    assert all(line.startswith("  - --") for line in lines[1:])


def test_cli_stop_with_unknown_characters_is_an_error(capsys, sample_run):
    code, _, err = run_main(capsys, sample_run, "--stop", "xa")
    assert code == 2 and "--stop" in err and "'x' (U+0078) at position 0" in err
    code, _, err = run_main(capsys, sample_run, "--prompt", "ax", "--stop", "zb")
    assert code == 2 and "2 bad arguments" in err
    assert "'x' (U+0078) at position 1" in err and "--stop 'zb'" in err


@pytest.mark.parametrize("temperature", ["1e-30", "1e-50", "1e-300", "5e-324"])
def test_cli_any_positive_temperature_gives_text(capsys, sample_run, temperature):
    """A tiny temperature gives the greedy text (it used to print NaN's token 0)."""
    common = ["--prompt", "ab", "--max-new-tokens", "60", "--top-k", "3"]
    _, greedy, _ = run_main(capsys, sample_run, *common, "--temperature", "0")
    code, text, err = run_main(capsys, sample_run, *common, "--temperature", temperature)
    assert code == 0, err
    assert text == greedy and len(set(greedy)) > 3


@pytest.mark.parametrize("stream", [True, False])
def test_cli_closed_pipe_ends_quietly(sample_run, stream):
    cmd = [sys.executable, str(ROOT / "sample.py"), "--out-dir", str(sample_run)]
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
    # Nothing but the line saying which weights speak: no traceback from the closed pipe.
    assert code == 0 and err.startswith("sampling ") and len(err.splitlines()) == 1, err


def test_a_missing_checkpoint_says_what_to_do(tmp_path):
    """Each kind of folder without the checkpoint gets its own fix: train a run, wait
    for its first evaluation (the step from its config.yaml), or use ckpt.pt."""
    from cli.checkpoint_args import resolve_checkpoint_path
    from model.checkpoint import CheckpointError

    def hint(out_dir, name="ckpt.pt"):
        with pytest.raises(CheckpointError) as e:
            resolve_checkpoint_path(out_dir, name)
        return str(e.value)

    assert "there is no run folder" in hint(tmp_path / "nowhere")
    assert "python train.py --config" in hint(tmp_path / "nowhere")
    assert "holds no run" in hint(tmp_path) and "first evaluation" in hint(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("train:\n  eval_interval: 550\n", encoding="utf-8")
    assert "has not reached its first evaluation (step 550)" in hint(run)  # no .lock: either
    (run / "ckpt.pt").write_bytes(b"")
    assert "best.pt appears at the run's first evaluation; ckpt.pt is there" in hint(run, "best.pt")


def test_an_out_dir_that_names_a_checkpoint_file_points_to_checkpoint(tmp_path, monkeypatch):
    """--out-dir runs/x/ckpt.pt (the file, not its folder) said "there is no run folder
    runs/x/ckpt.pt; train one first: ... out_dir=runs/x/ckpt.pt", which cannot work: a
    file stands there. The hint now names the two flags that would read it."""
    from cli.checkpoint_args import resolve_checkpoint_path
    from model.checkpoint import CheckpointError

    ckpt = tmp_path / "run" / "ckpt.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"")
    with pytest.raises(CheckpointError) as e:
        resolve_checkpoint_path(ckpt, "ckpt.pt")
    assert str(e.value) == (
        f"no checkpoint at {ckpt / 'ckpt.pt'}: {ckpt} is a file, not a run folder; "
        f"give --checkpoint {ckpt} to read that file, or --out-dir {ckpt.parent}"
    )
    assert "train.py" not in str(e.value)
    # A bare name given to --checkpoint is looked up in the run folder: ./ keeps it a path.
    monkeypatch.chdir(ckpt.parent)
    with pytest.raises(CheckpointError, match=r"give --checkpoint \./ckpt\.pt to read"):
        resolve_checkpoint_path("ckpt.pt", "ckpt.pt")


def run_sample_main(capsys, out_dir, *args):
    import sample

    code = sample.main(["--out-dir", str(out_dir), "--device", "cpu", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sample_says_which_weights_it_samples(sample_run, tmp_path, capsys):
    """On stderr (stdout is the samples alone): the checkpoint, its step and best loss."""
    ckpt = torch.load(sample_run / "ckpt.pt", weights_only=True)
    (tmp_path / "run").mkdir()
    torch.save({**ckpt, "iter_num": 1234, "best_val_loss": 1.5}, tmp_path / "run" / "ckpt.pt")
    out = tmp_path / "run"
    code, text, err = run_sample_main(capsys, out, "--prompt", "ab", "--max-new-tokens", "5")
    assert code == 0 and text.startswith("ab")
    assert err == f"sampling {out / 'ckpt.pt'} (step 1,234, best val 1.5000 nats/char)\n"


def test_sampling_arguments_from_the_bug_reports(tmp_path, capsys):
    out = hand_made_run(tmp_path / "abc", sorted("\n abc"), block_size=8)
    code, _, err = run_sample_main(capsys, out, "--prompt", "abd")
    assert code == 2 and "'d' (U+0064) at position 2" in err and "Traceback" not in err
    code, text, _ = run_sample_main(capsys, out, "--prompt", "ab", "--top-k", "200")
    assert code == 0 and text.startswith("ab")  # top_k above the 5-character vocabulary
    code, text, _ = run_sample_main(capsys, out, "--prompt", "cab", "--max-new-tokens", "0")
    assert code == 0 and text == "cab\n"
    long_prompt = "abc cab bca " * 3  # 36 characters, block_size 8: cropped, not an error
    code, text, _ = run_sample_main(capsys, out, "--prompt", long_prompt, "--max-new-tokens", "5")
    assert code == 0 and text.startswith(long_prompt) and len(text.rstrip("\n")) >= 36
    code, text, _ = run_sample_main(capsys, out, "--prompt", "a\r\nb", "--max-new-tokens", "0")
    assert code == 0 and text == "a\nb\n"  # prompts get the corpus's newline normalisation
    greedy = [run_sample_main(capsys, out, "--temperature", "0", "--seed", s)[1] for s in "12"]
    assert greedy[0] == greedy[1]  # temperature 0 is greedy: the seed does not matter
    code, _, err = run_sample_main(capsys, out, "--temperature", "-1")
    assert code == 2 and "temperature" in err


def test_no_prompt_starts_from_a_character_the_vocabulary_holds(tmp_path, capsys):
    out = hand_made_run(tmp_path / "nospace", list("abc"))  # no newline, no space
    code, text, _ = run_sample_main(capsys, out, "--max-new-tokens", "3")
    assert code == 0 and text.startswith("a") and len(text) == 5  # 'a' + 3 + newline


def test_console_that_cannot_encode_korean(sample_run):
    out = sample_run
    env = {**__import__("os").environ, "PYTHONIOENCODING": "ascii"}
    r = subprocess.run(
        [sys.executable, "sample.py", "--out-dir", str(out), "--device", "cpu", "--prompt", "새가"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert r.stdout.startswith(b"\\uc0c8\\uac00")  # escaped, not a UnicodeEncodeError


@pytest.mark.parametrize("page", ["docs/troubleshooting.md", "docs/troubleshooting.ko.md"])
def test_the_troubleshooting_rows_of_sampling_name_messages_sample_py_prints(page):
    """Each row of the message tables (docs/troubleshooting*.md) about sampling quotes text
    that sample.py or model/ can print (a row once named a sampler error no code raised)."""
    import re

    text = (ROOT / page).read_text(encoding="utf-8")
    sources = "".join(
        path.read_text(encoding="utf-8")
        for path in [ROOT / "sample.py", *sorted((ROOT / "model").glob("*.py"))]
    )
    rows = [
        line
        for line in text.splitlines()
        if line.startswith("| `") and re.search(r"sampler|bad arguments|--top|token id", line)
    ]
    assert rows, "the table has a row for sample.py's argument errors"
    for row in rows:
        for quoted in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            pieces = re.split(r"\.\.\.|\bN\b", quoted)  # placeholders
            longest = max(pieces, key=len).strip()
            assert longest in sources, (page, row)
