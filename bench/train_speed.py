"""Training throughput benchmark: ms/iteration, tokens/s, FLOPs, MFU, peak memory.

    python bench/train_speed.py                        # nanoGPT's CPU shape and our CPU recipe
    python bench/train_speed.py --config configs/shakespeare_char.yaml --iters 5
    python bench/train_speed.py --shape nanogpt-cpu --set model.n_layer=6
    python bench/train_speed.py --shape gpu-recipe --device cuda --iters 100
    python bench/train_speed.py --shape shipped-cpu --dtype float32,bfloat16,float16 --rounds 3

Each case runs the real training step (`training.loop.Trainer.train_step`: forward,
backward, gradient clipping, optimizer step) on the real corpus, in a fresh process
so that its peak memory is its own.

Precision (train.dtype): ``--dtype float32,bfloat16,float16`` times each case in each
dtype. With ``--rounds N`` every (case, dtype) runs N times, round by round and the
dtypes one after the other within a round, so that a host that slows down or speeds
up during the run weighs on every dtype alike; the table gives the median round and
each round's ms/iter, and each dtype's speed against float32's for the same case.
``--shape shipped-cpu`` names the shapes a CPU table needs (nanoGPT's CPU shape, the
host's yardstick; the two CPU recipes; the GPU recipe's model at batch 8),
``--shape shipped-gpu`` the two GPU recipes.

Model FLOPs per token (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, appendix B):

    6 * N + 12 * n_layer * n_embd * block_size

where N counts the parameters of every matrix multiply (position embeddings, a
lookup, are left out; the tied token embedding counts once, as the LM head). The
first term is the forward and backward pass through the weights (2 + 4 FLOPs per
weight per token), the second the attention scores and weighted sums. MFU is
achieved FLOP/s over the machine's peak, which the script measures as the best rate
of a large matrix product on the same device and threads, in the dtype the case's
matrix products run in (its resolved train.dtype: float32, bfloat16 or float16), 2048
x 2048 on CPU and 8192 x 8192 on CUDA.
"""

import argparse
import multiprocessing as mp
import queue as queue_module
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus  # noqa: E402
from model.device import DTYPE_NAMES  # noqa: E402
from training.config import load_config  # noqa: E402
from training.loop import Trainer  # noqa: E402

CORPUS = ROOT / DEFAULT_CORPUS_PATH  # ships with the code
SHAPES = {
    # nanoGPT's published CPU recipe (README of karpathy/nanoGPT).
    "nanogpt-cpu": (
        None,
        [
            "model.n_layer=4",
            "model.n_head=4",
            "model.n_embd=128",
            "model.block_size=64",
            "model.dropout=0.0",
            "model.bias=false",
            "train.batch_size=12",
        ],
    ),
    "cpu-recipe": (ROOT / "configs/shakespeare_char_cpu.yaml", []),
    "cpu-gpt2": (ROOT / "configs/shakespeare_char_cpu_gpt2.yaml", []),
    "gpu-recipe": (ROOT / "configs/shakespeare_char.yaml", []),
    "gpu-modern": (ROOT / "configs/shakespeare_char_modern.yaml", []),
    # The GPU recipe's model (6 layers, 384 wide, block 256) at a batch a CPU times in
    # seconds, not minutes.
    "gpu-recipe-b8": (ROOT / "configs/shakespeare_char.yaml", ["train.batch_size=8"]),
}
# Names that stand for several shapes.
SHAPE_GROUPS = {
    "shipped-cpu": ["nanogpt-cpu", "cpu-recipe", "cpu-gpt2", "gpu-recipe-b8"],
    "shipped-gpu": ["gpu-recipe", "gpu-modern"],
}


def measure_peak_gflops(
    device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 10
) -> float:
    """Best observed rate, in GFLOP/s, of an (n x n) @ (n x n) matrix product in
    ``dtype`` (2 n^3 FLOPs each), random inputs."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def flops_per_token(model, n_layer: int, n_embd: int, block_size: int) -> float:
    """6 N + 12 n_layer n_embd block_size (see the module docstring)."""
    n = sum(p.numel() for p in model.parameters())  # tied weights counted once
    if model.position_embedding is not None:
        n -= model.position_embedding.weight.numel()
    return 6 * n + 12 * n_layer * n_embd * block_size


def run_case(name: str, config: Path | None, overrides: list[str], iters: int, warmup: int, queue):
    """Child process: time `iters` training steps after `warmup` untimed ones (in the
    dtype the overrides' train.dtype names, if any)."""
    with tempfile.TemporaryDirectory() as tmp:
        # The default corpus unless --set data.path=... names another (later wins).
        cfg = load_config(
            config,
            [f"data.path={CORPUS}"]
            + overrides
            + [
                f"out_dir={tmp}/run",
                f"data.cache_dir={tmp}/cache",
                f"train.max_iters={iters + warmup}",
            ],
        )
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        trainer = Trainer(cfg)
        trainer.model.train()
        device = trainer.device
        for step in range(warmup):
            trainer.train_step(step)
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for step in range(warmup, warmup + iters):
            loss, _, _ = trainer.train_step(step)
        loss.item()  # wait for the device
        seconds = time.perf_counter() - t0
        m, t = cfg.model, cfg.train
        tokens_per_iter = t.batch_size * t.gradient_accumulation_steps * m.block_size
        if device.type == "cuda":
            peak_mb = torch.cuda.max_memory_allocated() / 2**20
        else:  # ru_maxrss is in KiB on Linux: the process's resident peak
            peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
        peak_dtype = trainer.precision.dtype  # the dtype the matrix products ran in
        matrix_size = 8192 if device.type == "cuda" else 2048
        queue.put(
            {
                "name": name,
                "device": str(device),
                "shape": f"{m.n_layer}L {m.n_head}H {m.n_embd}C T{m.block_size} B{t.batch_size}",
                "ms_per_iter": 1000 * seconds / iters,
                "tokens_per_iter": tokens_per_iter,
                "tokens_per_sec": tokens_per_iter * iters / seconds,
                "flops_per_token": flops_per_token(
                    trainer.model, m.n_layer, m.n_embd, m.block_size
                ),
                "peak_mb": peak_mb,
                "peak_gflops": measure_peak_gflops(device, peak_dtype, matrix_size),
                "peak_dtype": str(peak_dtype).removeprefix("torch."),
                "dtype": trainer.precision.describe().removeprefix("dtype "),
            }
        )


def case_result(name: str, proc, queue) -> dict:
    """The row a case's process puts on ``queue``.

    Raises:
        SystemExit: if the process ended without one (its traceback is on stderr), so a
            failed case ends the script instead of leaving it waiting.
    """
    while True:
        try:
            return queue.get(timeout=1)
        except queue_module.Empty:
            if proc.is_alive():
                continue
        try:  # ended: a row it sent just before may still be in the pipe
            return queue.get(timeout=5)
        except queue_module.Empty:
            raise SystemExit(
                f"case {name} failed (exit status {proc.exitcode}); its error is above"
            ) from None


def shape_names(values: list[str]) -> list[str]:
    """--shape values (each a name, a group of SHAPE_GROUPS, or a comma-separated list
    of them) as shape names, in order, each once.

    Raises:
        ValueError: naming an unknown shape and the known ones.
    """
    names = []
    for value in values:
        for name in filter(None, (n.strip() for n in value.split(","))):
            for shape in SHAPE_GROUPS.get(name, [name]):
                if shape not in SHAPES:
                    known = ", ".join([*SHAPES, *SHAPE_GROUPS])
                    raise ValueError(f"--shape {name}: unknown; use {known}")
                if shape not in names:
                    names.append(shape)
    return names


def dtype_names(values: list[str]) -> list[str]:
    """--dtype values (each a dtype or a comma-separated list) as train.dtype names.

    Raises:
        ValueError: naming an unknown dtype and the choices.
    """
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    for name in names:
        if name not in DTYPE_NAMES:
            raise ValueError(f"--dtype {name}: unknown; use {', '.join(DTYPE_NAMES)}")
    return list(dict.fromkeys(names))


def cpu_bfloat16_flags() -> str:
    """The CPU's bfloat16 instruction flags as Linux lists them in /proc/cpuinfo
    (avx512_bf16, amx_bf16), "none", or "unknown" where there is no such file."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8").split())
    except OSError:
        return "unknown"
    return ", ".join(f for f in ("avx512_bf16", "amx_bf16") if f in flags) or "none"


def table(results: dict[tuple[str, str | None], list[dict]]) -> list[str]:
    """The Markdown table of every (case, dtype): the median round's ms/iter and every
    round's, the speed against the same case in float32, and the throughput, FLOPs and
    MFU of the median round."""
    columns = (
        "case,dtype,device,shape,ms/iter,rounds ms/iter,vs float32,tokens/s,MFLOP/token,"
        "GFLOP/s,peak GFLOP/s,peak dtype,MFU,peak MB"
    ).split(",")
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    medians = {
        key: statistics.median(r["ms_per_iter"] for r in runs) for key, runs in results.items()
    }
    float32 = {}  # case -> median ms/iter of its float32 rounds
    for (case, _), runs in results.items():
        if runs[0]["peak_dtype"] == "float32":
            float32.setdefault(case, medians[(case, _)])
    for key, runs in results.items():
        case, ms = key[0], medians[key]
        r = runs[0]
        rounds = " / ".join(f"{run['ms_per_iter']:.1f}" for run in runs)
        ratio = f"{float32[case] / ms:.2f}x" if case in float32 else ""
        tokens_per_sec = r["tokens_per_iter"] * 1000 / ms
        achieved = r["flops_per_token"] * tokens_per_sec / 1e9
        peak = max(run["peak_gflops"] for run in runs)
        lines.append(
            f"| {case} | {r['dtype']} | {r['device']} | {r['shape']} | {ms:.1f} | {rounds} | "
            f"{ratio} | {tokens_per_sec:,.0f} | {r['flops_per_token'] / 1e6:.2f} | "
            f"{achieved:.1f} | {peak:.1f} | {r['peak_dtype']} | {100 * achieved / peak:.0f}% | "
            f"{max(run['peak_mb'] for run in runs):.0f} |"
        )
    return lines


def main() -> None:
    """Parse arguments, run each case in its own process, print a Markdown table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        help=f"named case(s), comma-separated or repeated: {', '.join([*SHAPES, *SHAPE_GROUPS])}",
    )
    parser.add_argument("--config", action="append", default=[], help="YAML config(s) to time")
    parser.add_argument("--set", action="append", default=[], help="override for every case")
    parser.add_argument("--device", help="device for every case (auto, cpu, cuda, mps)")
    parser.add_argument(
        "--dtype",
        action="append",
        default=[],
        help="train.dtype(s) to time each case in, e.g. float32,bfloat16,float16 "
        "(default: each config's own)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="times each (case, dtype) runs, alternated"
    )
    parser.add_argument("--iters", type=int, default=50, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    args = parser.parse_args()
    try:
        shapes = shape_names(args.shape)
        dtypes = dtype_names(args.dtype) or [None]  # None: the config's train.dtype
    except ValueError as e:
        parser.error(str(e))
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    ensure_default_corpus(CORPUS)  # once, before the cases' processes start
    cases = [
        (s, *SHAPES[s]) for s in (shapes or ([] if args.config else ["nanogpt-cpu", "cpu-recipe"]))
    ]
    cases += [(Path(c).stem, Path(c), []) for c in args.config]
    common = args.set + ([f"device={args.device}"] if args.device else [])
    ctx = mp.get_context("spawn")
    results: dict[tuple[str, str | None], list[dict]] = {}
    # Round by round, and within a round each case in every dtype in turn: drift of the
    # host's speed during the run falls on every dtype alike.
    for _ in range(args.rounds):
        for name, config, overrides in cases:
            for dtype in dtypes:
                chosen = [f"train.dtype={dtype}"] if dtype else []
                queue = ctx.Queue()
                proc = ctx.Process(
                    target=run_case,
                    args=(
                        name,
                        config,
                        overrides + common + chosen,
                        args.iters,
                        args.warmup,
                        queue,
                    ),
                )
                proc.start()
                results.setdefault((name, dtype), []).append(case_result(name, proc, queue))
                proc.join()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}, CPU bfloat16 flags: "
        f"{cpu_bfloat16_flags()}; {args.rounds} round(s) of {args.iters} steps"
    )
    for (case, _), runs in results.items():  # the host's yardstick, if it was timed
        if case == "nanogpt-cpu" and runs[0]["peak_dtype"] == "float32" and not args.set:
            ms = statistics.median(r["ms_per_iter"] for r in runs)
            print(f"yardstick (nanogpt-cpu in float32): {ms:.1f} ms/iter")
            break
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
