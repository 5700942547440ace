"""Corpus size benchmark: preparation time and memory, training step time and memory,
and one periodic evaluation's time, from 1 MB to 1 GB of text.

    python bench/data_scale.py                                  # synthetic 1, 10, 100, 1000 MB
    python bench/data_scale.py --sizes 1,100                    # fewer sizes (MB)
    python bench/data_scale.py --path corpora/linux --include '*.c,*.h'   # a real corpus

Synthetic corpora are written to a temporary folder: a 4 MB block of random words
(Tiny Shakespeare's vocabulary, with some accented and Korean words so that decoding is
not pure ASCII) repeated to the size asked for. Each measurement runs in a fresh
process, so its peak resident memory (VmHWM: the interpreter and torch included,
about 220 MB before any data, given in brackets) is its own:

- prepare: `data.prepare_corpus` into an empty cache (both passes, tokens written);
  MB/s is corpus bytes over those seconds.
- cached: the same call again, the cache in place (it hashes every file).
- step: the CPU recipe's model (configs/shakespeare_char_cpu.yaml, without compile)
  trained for --steps steps on the corpus, ms per step after 5 warm-up steps; RSS is
  the process's resident memory after the steps (VmRSS) and, in brackets, its peak.
- eval: one periodic evaluation (`Evaluator.losses`: train.eval_tokens characters of
  the validation split and train.eval_train_tokens of the training split), without the
  TensorBoard sample and heatmaps (about 2 s more on 2 CPU cores).
"""

import argparse
import contextlib
import io
import multiprocessing as mp
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus  # noqa: E402

RECIPE = ROOT / "configs/shakespeare_char_cpu.yaml"
BLOCK_BYTES = 4 << 20
EXTRA_WORDS = ["café", "naïve", "señor", "새가", "하늘을", "날았다", "über", "œuvre"]


def synthetic_corpus(path: Path, megabytes: float, seed: int = 0) -> None:
    """Write about ``megabytes`` MB (10^6 bytes) of random words to ``path``, cut at a
    line end."""
    shakespeare = ROOT / DEFAULT_CORPUS_PATH
    ensure_default_corpus(shakespeare)
    words = sorted(set(shakespeare.read_text(encoding="utf-8").split())) + EXTRA_WORDS
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(words), BLOCK_BYTES // 5)
    ends = rng.choice([" ", " ", " ", " ", " ", " ", "\n"], len(chosen))
    block = "".join(w + e for w, e in zip(np.array(words)[chosen], ends, strict=True))
    block = block.encode()[:BLOCK_BYTES]
    block = block[: block.rindex(b"\n") + 1]
    target = int(megabytes * 1e6)
    with open(path, "wb") as f:
        written = 0
        while written + len(block) <= target:
            f.write(block)
            written += len(block)
        rest = block[: target - written]
        if b"\n" in rest:
            f.write(rest[: rest.rindex(b"\n") + 1])


def _status_mb(field: str) -> float | None:
    """A memory field of /proc/self/status (VmRSS, VmHWM), MB; None without /proc."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    return int(re.search(field + r":\s+(\d+)", status).group(1)) / 1024


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, MB: VmHWM, as ru_maxrss would carry
    the parent's peak over into a spawned child on Linux (it survives exec)."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb() -> float:
    """This process's resident memory now (VmRSS), MB; NaN without /proc."""
    now = _status_mb("VmRSS")
    return now if now is not None else float("nan")


def prepare_case(path: str, include: str, cache: str, chunk_bytes: int | None, queue) -> None:
    """Child process: prepare the corpus into an empty cache, then read it again."""
    from data import prepare_corpus
    from data.decoding import DEFAULT_CHUNK_BYTES

    chunk = chunk_bytes or DEFAULT_CHUNK_BYTES
    baseline = peak_rss_mb()
    t0 = time.perf_counter()
    corpus = prepare_corpus(path, 0.1, cache, include=include, chunk_bytes=chunk)
    prepare_s = time.perf_counter() - t0
    peak = peak_rss_mb()
    t0 = time.perf_counter()
    prepare_corpus(path, 0.1, cache, include=include, chunk_bytes=chunk)
    queue.put(
        {
            "prepare_s": prepare_s,
            "cached_s": time.perf_counter() - t0,
            "prepare_peak_mb": peak,
            "baseline_mb": baseline,
            "origin": corpus.origin,
        }
    )


def training_case(path: str, include: str, cache: str, steps: int, queue) -> None:
    """Child process: time training steps and one periodic evaluation."""
    from training.config import load_config
    from training.loop import Trainer

    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        overrides = [
            f"data.path={path}",
            f"data.include={include}",
            f"data.cache_dir={cache}",
            f"out_dir={tmp}/run",
            "train.compile=false",
        ]
        trainer = Trainer(load_config(RECIPE, overrides))
        trainer.model.train()
        for step in range(5):
            trainer.train_step(step)
        t0 = time.perf_counter()
        for step in range(5, 5 + steps):
            loss, _, _ = trainer.train_step(step)
        loss.item()
        step_ms = 1000 * (time.perf_counter() - t0) / steps
        rss = resident_mb()
        t0 = time.perf_counter()
        trainer.evaluator.losses(trainer.fast_model)
        eval_s = time.perf_counter() - t0
        trainer.close(started=False)
        peak = peak_rss_mb()
        queue.put({"step_ms": step_ms, "rss_mb": rss, "train_peak_mb": peak, "eval_s": eval_s})


def in_child(target, *args) -> dict:
    """Run ``target(*args, queue)`` in a fresh process and return what it puts."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def measure(name: str, path: str, include: str, args, tmp: Path) -> dict:
    """Every figure of one corpus (its own cache folder, removed afterwards)."""
    cache = tmp / f"cache-{name}"
    row = {"name": name}
    chunk = int(args.chunk_mb * 2**20) if args.chunk_mb else None
    row.update(in_child(prepare_case, path, include, str(cache), chunk))
    row["mb"] = float(re.search(r"([\d,.]+) MB\)", row["origin"]).group(1).replace(",", ""))
    files = re.search(r"\(([\d,]+) files", row["origin"])
    row["files"] = files.group(1) if files else "1"
    if args.steps:
        row.update(in_child(training_case, path, include, str(cache), args.steps))
    print(row["origin"], file=sys.stderr, flush=True)
    return row


def main() -> None:
    """Parse arguments, measure each corpus, print a Markdown table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,10,100,1000", help="synthetic sizes, MB")
    parser.add_argument("--path", help="a real corpus (file, folder or glob) instead")
    parser.add_argument("--include", default="*", help="data.include for --path")
    parser.add_argument("--steps", type=int, default=50, help="timed training steps (0: none)")
    parser.add_argument("--chunk-mb", type=float, help="preparation chunk size, MB (default 1)")
    parser.add_argument("--tmp", help="folder for the corpora and caches (default: a temp one)")
    args = parser.parse_args()
    import torch

    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        tmp = Path(tmp)
        if args.path:
            rows.append(measure(Path(args.path).name, args.path, args.include, args, tmp))
        else:
            for size in [float(s) for s in args.sizes.split(",")]:
                corpus = tmp / f"synthetic_{size:g}MB.txt"
                synthetic_corpus(corpus, size)
                rows.append(measure(f"synthetic {size:g} MB", str(corpus), "*", args, tmp))
                corpus.unlink()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    columns = [
        "corpus", "MB", "files", "prepare s", "MB/s", "prepare peak RSS MB (at start)",
        "cached start s", "step ms", "training RSS MB (peak)", "periodic eval s",
    ]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|")
    for r in rows:
        training = (
            f"{r['step_ms']:.1f} | {r['rss_mb']:,.0f} ({r['train_peak_mb']:,.0f}) | "
            f"{r['eval_s']:.1f}"
            if "step_ms" in r
            else "- | - | -"
        )
        print(
            f"| {r['name']} | {r['mb']:,.1f} | {r['files']} | {r['prepare_s']:.1f} | "
            f"{r['mb'] / r['prepare_s']:,.1f} | {r['prepare_peak_mb']:,.0f} "
            f"({r['baseline_mb']:,.0f}) | {r['cached_s']:.1f} | {training} |"
        )


if __name__ == "__main__":
    main()
