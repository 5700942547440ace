"""Training throughput benchmark: ms/iteration, tokens/s, FLOPs, MFU, peak memory.

    python bench/train_speed.py                        # nanoGPT's CPU shape and our CPU recipe
    python bench/train_speed.py --config configs/shakespeare_char.yaml --iters 5
    python bench/train_speed.py --shape nanogpt-cpu --set model.n_layer=6
    python bench/train_speed.py --shape gpu-recipe --device cuda --iters 100

Each case runs the real training step (`training.loop.Trainer.train_step`: forward,
backward, gradient clipping, optimizer step) on the real corpus, in a fresh process
so that its peak memory is its own.

Model FLOPs per token (Kaplan et al. 2020; PaLM, Chowdhery et al. 2022, appendix B):

    6 * N + 12 * n_layer * n_embd * block_size

where N counts the parameters of every matrix multiply (position embeddings, a
lookup, are left out; the tied token embedding counts once, as the LM head). The
first term is the forward and backward pass through the weights (2 + 4 FLOPs per
weight per token), the second the attention scores and weighted sums. MFU is
achieved FLOP/s over the machine's peak, which the script measures as the best rate
of a large matrix product on the same device and threads, in the dtype training's
matrix products use there: float32 on CPU (2048 x 2048), bfloat16 on CUDA
(8192 x 8192, as training runs under bf16 autocast).
"""

import argparse
import multiprocessing as mp
import queue as queue_module
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.corpus import DEFAULT_CORPUS_PATH, ensure_default_corpus  # noqa: E402
from model.device import auto_dtype  # noqa: E402
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
    "gpu-recipe": (ROOT / "configs/shakespeare_char.yaml", []),
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
    """Child process: time `iters` training steps after `warmup` untimed ones."""
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
        peak_dtype = auto_dtype(device)
        matrix_size = 8192 if device.type == "cuda" else 2048
        queue.put(
            {
                "name": name,
                "device": str(device),
                "shape": f"{m.n_layer}L {m.n_head}H {m.n_embd}C T{m.block_size} B{t.batch_size}",
                "ms_per_iter": 1000 * seconds / iters,
                "tokens_per_sec": tokens_per_iter * iters / seconds,
                "flops_per_token": flops_per_token(
                    trainer.model, m.n_layer, m.n_embd, m.block_size
                ),
                "peak_mb": peak_mb,
                "peak_gflops": measure_peak_gflops(device, peak_dtype, matrix_size),
                "peak_dtype": str(peak_dtype).removeprefix("torch."),
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


def main() -> None:
    """Parse arguments, run each case in its own process, print a Markdown table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="named case(s)")
    parser.add_argument("--config", action="append", default=[], help="YAML config(s) to time")
    parser.add_argument("--set", action="append", default=[], help="override for every case")
    parser.add_argument("--device", help="device for every case (auto, cpu, cuda, mps)")
    parser.add_argument("--iters", type=int, default=50, help="timed steps per case")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    args = parser.parse_args()
    ensure_default_corpus(CORPUS)  # once, before the cases' processes start
    cases = [
        (s, *SHAPES[s])
        for s in (args.shape or ([] if args.config else ["nanogpt-cpu", "cpu-recipe"]))
    ]
    cases += [(Path(c).stem, Path(c), []) for c in args.config]
    common = args.set + ([f"device={args.device}"] if args.device else [])
    ctx = mp.get_context("spawn")
    rows = []
    for name, config, overrides in cases:
        queue = ctx.Queue()
        proc = ctx.Process(
            target=run_case,
            args=(name, config, overrides + common, args.iters, args.warmup, queue),
        )
        proc.start()
        rows.append(case_result(name, proc, queue))
        proc.join()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    columns = (
        "case,device,shape,ms/iter,tokens/s,MFLOP/token,GFLOP/s,peak GFLOP/s,peak dtype,MFU,peak MB"
    )
    print("| " + " | ".join(columns.split(",")) + " |")
    print("|---" * len(columns.split(",")) + "|")
    for r in rows:
        achieved = r["flops_per_token"] * r["tokens_per_sec"] / 1e9
        print(
            f"| {r['name']} | {r['device']} | {r['shape']} | {r['ms_per_iter']:.1f} | "
            f"{r['tokens_per_sec']:,.0f} | {r['flops_per_token'] / 1e6:.2f} | {achieved:.1f} | "
            f"{r['peak_gflops']:.1f} | {r['peak_dtype']} | "
            f"{100 * achieved / r['peak_gflops']:.0f}% | {r['peak_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
