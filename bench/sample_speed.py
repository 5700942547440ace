"""Sampling speed in characters per second, the figure a user waits on (a benchmark,
not a test).

    python bench/sample_speed.py                      # the six rows (a few minutes)
    python bench/sample_speed.py --new-tokens 100     # a quick look
    python bench/sample_speed.py --device cuda        # on a GPU (the step compiled)
    python bench/sample_speed.py --compile            # compile the step on CPU too
    python bench/sample_speed.py --no-cache           # add the uncached reference
    python bench/sample_speed.py --against ../old     # this checkout against another
    python bench/sample_speed.py --products-ab        # CPU products on against off

For each model shape and batch size, generates --new-tokens characters per sequence
from a --prompt-len character prompt with random weights (vocab 65, eval mode,
temperature 1) through `model.engine.generate` (static KV cache, prefill, one-token
steps), and prints characters per second: characters generated in the whole batch
divided by wall-clock seconds. One untimed warm-up run of a few tokens precedes
each timing (it also compiles the step, with --compile). Past block_size the window
slides (a RoPE model's cache rolls; a learned-position model refills 3/4 of its window
every block_size/4 characters), and that cost is included.

The model runs in float32 on every device, as sample.py runs it; on CUDA the clock
is read after the device has finished (torch.cuda.synchronize).

--against DIR compares two checkouts row by row: for each row, DIR's own
bench/sample_speed.py and this one run alternately (--rounds times each, in fresh
processes, the first to run alternating too), and the table gives each side's rounds
and the range of this / DIR. Any checkout whose script takes these flags works
(03df3b6's does). Run it on a quiet machine.

--products-ab compares this checkout with `model.cpu_products` off (the first side)
and on, alternately in fresh processes, in the same table: what the few-row CPU
products are worth.

--prompt-len block_size times the steady state at full context only. On a machine
shared with other work, --threads 1 gives steadier figures: with every core busy,
PyTorch's threads wait on one another at each small operation of a decode step.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import GPT, GPTConfig  # noqa: E402  (needs the path above)
from model.device import DeviceError, resolve_device  # noqa: E402
from model.engine import Engine  # noqa: E402
from model.sampling import Sampling, make_generator  # noqa: E402

# name -> (n_layer, n_head, n_embd, block_size, position)
SHAPES = {
    "cpu": (4, 4, 128, 128, "rope"),  # configs/shakespeare_char_cpu.yaml's shape, RoPE
    "6x384": (6, 6, 384, 256, "learned"),  # configs/shakespeare_char.yaml (GPT-2)
    "6x384-rope": (6, 6, 384, 256, "rope"),  # the same shape with RoPE (the modern recipe)
}
VOCAB_SIZE = 65  # Tiny Shakespeare's characters


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; every size can be made small for a short run."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models", default="cpu,6x384,6x384-rope", help=f"comma list of {sorted(SHAPES)}"
    )
    p.add_argument("--batch-sizes", default="1,8", help="comma list of batch sizes")
    p.add_argument("--new-tokens", type=int, default=1000, help="characters per sequence")
    p.add_argument("--prompt-len", type=int, default=1, help="prompt characters")
    p.add_argument("--no-cache", action="store_true",
                   help="also time the uncached reference path (slow)")  # fmt: skip
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="compile the decode step (default: the device's, on for CUDA)")  # fmt: skip
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--device", default="cpu", help="cpu, cuda, mps or auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--against", metavar="DIR", help="another checkout, run alternately")
    p.add_argument("--rounds", type=int, default=2, help="with --against: runs of each side")
    p.add_argument("--cpu-products", action=argparse.BooleanOptionalAction, default=None,
                   help="few-row CPU products in decode steps (default: CPU, eager)")  # fmt: skip
    p.add_argument("--products-ab", action="store_true",
                   help="--no-cpu-products against --cpu-products, alternately")  # fmt: skip
    return p.parse_args(argv)


def wait_for(device: torch.device) -> None:
    """Block until the device has finished its queued work (CUDA runs asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def chars_per_second(model: GPT, batch: int, args: argparse.Namespace, use_cache: bool) -> float:
    """Characters generated per wall-clock second over the batch (B * new / seconds):
    with the KV cache (`model.engine.Engine`, as `model.engine.generate` runs it), or
    through the uncached reference `GPT.generate`."""
    device = next(model.parameters()).device
    sampling = Sampling(generator=make_generator(args.seed, device))
    prompt = torch.randint(
        0, VOCAB_SIZE, (batch, args.prompt_len), generator=torch.Generator().manual_seed(args.seed)
    ).to(device)

    def run(new_tokens: int) -> None:
        if use_cache:
            engine = Engine(model, compile=args.compile, cpu_products=args.cpu_products)
            for _ in engine.tokens(prompt, new_tokens, sampling):
                pass
        else:
            model.generate(prompt, new_tokens, generator=sampling.generator)

    run(4)  # warm-up
    wait_for(device)
    start = time.perf_counter()
    run(args.new_tokens)
    wait_for(device)
    return batch * args.new_tokens / (time.perf_counter() - start)


def row_rate(
    script: Path, name: str, batch: int, args: argparse.Namespace, extra: tuple[str, ...] = ()
) -> float:
    """Characters per second of one row, from ``script`` (with the flags ``extra``) run
    in a fresh process in its own checkout (the last cell of its one table row)."""
    cmd = [sys.executable, str(script), "--models", name, "--batch-sizes", str(batch), *extra]
    cmd += ["--new-tokens", str(args.new_tokens), "--prompt-len", str(args.prompt_len)]
    cmd += ["--device", args.device, "--seed", str(args.seed)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.compile is not None:
        cmd.append("--compile" if args.compile else "--no-compile")
    done = subprocess.run(
        cmd, cwd=script.parent.parent, capture_output=True, text=True, check=False
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "layers" in line]
    if done.returncode != 0 or len(rows) != 1:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return float(rows[0].split("|")[-2].strip().replace(",", ""))


def compare(args: argparse.Namespace) -> None:
    """Each (model, batch) row from two sides, alternately: ``args.against``'s script
    and this one, or (--products-ab) this one without and with the CPU products; print
    both sides' rounds and second / first as a Markdown table."""
    ours = Path(__file__).resolve()
    if args.products_ab:
        sides = [(ours, ("--no-cpu-products",)), (ours, ("--cpu-products",))]
        labels = ("--no-cpu-products", "--cpu-products", "on / off")
    else:
        other = Path(args.against).resolve() / "bench" / "sample_speed.py"
        if not other.is_file():
            raise SystemExit(f"--against: no bench/sample_speed.py in {args.against}")
        sides = [(other, ()), (ours, ())]
        labels = (args.against, "this checkout", "this / other")
    print(f"| model | batch | {labels[0]} (chars/s) | {labels[1]} (chars/s) | {labels[2]} |")
    print("|---|---|---|---|---|")
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            rates = ([], [])  # the first side's, the second's
            for round_ in range(args.rounds):
                for side in (0, 1) if round_ % 2 == 0 else (1, 0):
                    script, extra = sides[side]
                    rates[side].append(row_rate(script, name, batch, args, extra))
            ratios = [a / b for a, b in zip(rates[1], rates[0], strict=True)]
            cells = [" / ".join(f"{r:,.0f}" for r in side) for side in rates]
            span = f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(f"| {name} | {batch} | {cells[0]} | {cells[1]} | {span} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Time every (model, batch) pair and print a Markdown table."""
    args = parse_args(argv)
    if args.against or args.products_ab:
        compare(args)
        return
    try:
        device = resolve_device(args.device)
    except DeviceError as e:
        raise SystemExit(f"--device: {e}") from None
    if args.threads:
        torch.set_num_threads(args.threads)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(
        f"torch {torch.__version__}, {where}, {torch.get_num_threads()} threads, "
        f"{args.new_tokens} new characters per sequence, prompt {args.prompt_len}"
    )
    step = {None: "the device's default", True: "compiled", False: "eager"}[args.compile]
    print(f"decode step: {step}")
    extra = " no cache (chars/s) |" if args.no_cache else ""
    print(f"| model | batch | chars/s |{extra}")
    print("|---|---|---|" + ("---|" if args.no_cache else ""))
    for name in args.models.split(","):
        n_layer, n_head, n_embd, block_size, position = SHAPES[name]
        torch.manual_seed(args.seed)
        config = GPTConfig(VOCAB_SIZE, block_size, n_layer, n_head, n_embd, position=position)
        model = GPT(config).eval().to(device)
        label = f"{n_layer} layers, {n_head} heads, {n_embd} wide, block {block_size}, {position}"
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            cells = f"{chars_per_second(model, batch, args, use_cache=True):,.0f} |"
            if args.no_cache:
                cells += f" {chars_per_second(model, batch, args, use_cache=False):,.0f} |"
            print(f"| {label} | {batch} | {cells}", flush=True)


if __name__ == "__main__":
    main()
