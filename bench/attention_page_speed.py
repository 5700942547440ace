"""How long the attention page's server takes to answer, part by part (a benchmark, not
a test).

    python bench/attention_page_speed.py                  # T = 64 and 128, 20 rounds
    python bench/attention_page_speed.py --rounds 5 --lengths 16,64
    python bench/attention_page_speed.py --browser        # also the wait in Chromium
    python bench/attention_page_speed.py --encodings float32   # packed tables only

The model has the CPU recipe's shape (configs/shakespeare_char_cpu.yaml: 4 layers, 4
heads, 128 wide, block 128, RoPE, RMSNorm, QK-norm) with freshly initialised weights,
and --vocab-size characters (1,011 by default: the Korean sample's). It is served as
`explore_attention.py --serve` serves it, on 127.0.0.1.

Two things a learner waits for, each at every prompt length T:

  prompt  a new prompt: the page asks /api/attention (every layer's weights, the next
          characters, the logit lens) and then /api/steps (one head's steps), and the
          model runs once.
  switch  a what-if switch turned on: the same two requests with the switch; the
          model runs once more (the switched pass), the model's own pass is kept.

For each, the median over --rounds of: the forward pass that records every step
(`record_forward`), the logit lens (`layer_predictions`), building the two answers
(`AttentionExplorer.explain` and `.steps` once the pass is made, lens included), JSON
encoding them, their size, and the two HTTP requests end to end (server and transfer;
the client decodes with Python's json), for each answer encoding (--encodings: "json",
the nested lists the page reads today, and "float32", tables packed as float32 bytes,
viz/array_encoding.py; "build" and "encode" then also change). --browser adds the
time from the click to
the steps drawn in headless Chromium (needs selenium, chromium and its driver), which
includes the browser's parsing and drawing. The last line says which part dominates.
Run it on a quiet machine; --threads 1 gives steadier figures on a shared one.
"""

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from data.tokenizer import CharTokenizer  # noqa: E402  (needs the path above)
from model import GPT, GPTConfig  # noqa: E402
from training.config import load_config  # noqa: E402
from viz.attention_server import AttentionExplorer, ExplorerServer  # noqa: E402
from viz.attention_steps import WhatIf, record_forward  # noqa: E402
from viz.logit_lens import layer_predictions  # noqa: E402

RECIPE = Path(__file__).resolve().parent.parent / "configs" / "shakespeare_char_cpu.yaml"
SWITCH = ("no_mask",)
LAYER, HEAD = 0, 0  # the switched head: the first layer, so every layer after it runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="64,128", help="comma list of prompt lengths T")
    p.add_argument("--rounds", type=int, default=20, help="timed repetitions (median shown)")
    p.add_argument("--vocab-size", type=int, default=1011, help="characters in the vocabulary")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--browser", action="store_true", help="also time the page in Chromium")
    p.add_argument(
        "--encodings", default="json,float32", help="comma list of answer encodings to time"
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def make_explorer(vocab_size: int, seed: int) -> AttentionExplorer:
    """The CPU recipe's model with fresh weights, and a vocabulary of Hangul syllables."""
    config = GPTConfig(**{**vars(load_config(RECIPE).model), "vocab_size": vocab_size})
    torch.manual_seed(seed)
    model = GPT(config).eval()
    chars = [chr(0xAC00 + i) for i in range(vocab_size - 1)] + [" "]
    return AttentionExplorer(model, CharTokenizer(sorted(chars)), "fresh CPU-recipe model")


def prompts(explorer: AttentionExplorer, T: int, count: int, seed: int) -> list[str]:
    """``count`` different prompts of T characters (each new to the explorer's cache)."""
    generator = torch.Generator().manual_seed(seed)
    chars = explorer.tokenizer.chars
    ids = torch.randint(0, len(chars), (count, T), generator=generator)
    return ["".join(chars[i] for i in row) for row in ids.tolist()]


def post(url: str, path: str, body: dict) -> bytes:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def clock(fn) -> tuple[float, object]:
    """(milliseconds ``fn()`` took, its result)."""
    start = time.perf_counter()
    result = fn()
    return 1000 * (time.perf_counter() - start), result


def time_parts(
    explorer: AttentionExplorer, url: str, prompt: str, switched: bool, encoding: str = "json"
) -> dict:
    """One round's timings (ms) and size (bytes) for a prompt or a switch, its answers
    in ``encoding``."""
    what_if = WhatIf(LAYER, HEAD, SWITCH) if switched else None
    fields = {"layer": LAYER, "head": HEAD, "switches": list(SWITCH) if switched else []}
    fields["encoding"] = encoding
    if switched:  # the model's own pass is kept from the prompt's answer
        post(url, "api/attention", {"prompt": prompt})
    _, ids, _ = explorer.prepare(prompt)
    parts = {}
    parts["forward"], record = clock(lambda: record_forward(explorer.model, ids, what_if))
    parts["lens"], _ = clock(lambda: layer_predictions(explorer.model, record, 5))
    # The answers over HTTP, the pass made afresh (a new prompt, or a new switch).
    http_attention, attention = clock(
        lambda: post(url, "api/attention", {"prompt": prompt, **fields})
    )
    http_steps, steps = clock(lambda: post(url, "api/steps", {"prompt": prompt, **fields}))
    parts["http"] = http_attention + http_steps
    parts["bytes"] = len(attention) + len(steps)
    # Building and encoding them again, the pass now kept.
    build_a, answer = clock(lambda: explorer.explain(prompt, 1.0, what_if, encoding))
    build_s, step_answer = clock(lambda: explorer.steps(prompt, LAYER, HEAD, what_if, encoding))
    parts["build"] = build_a + build_s
    parts["encode"], _ = clock(
        lambda: [json.dumps(a, ensure_ascii=False).encode() for a in (answer, step_answer)]
    )
    return parts


def time_browser(url: str, texts: list[str], T: int) -> dict:
    """Median ms from pressing Show (or a switch) to the steps drawn, in Chromium."""
    from tests.viz.browser import Page, browser_missing, open_browser

    missing = browser_missing()
    if missing:
        print(f"skipped the browser: {missing}")
        return {}
    driver = open_browser(1400, 1000)
    page = Page(driver)
    shown, switched = [], []
    box = "document.getElementById('prompt').value = arguments[0]"
    try:
        page.open(url)
        page.show(texts[-1])  # untimed: the layer's buttons appear with a first answer
        page.find(f'#layers button[data-value="{LAYER}"]').click()
        page.find(f'#heads button[data-value="{HEAD}"]').click()
        page.steps_ready(LAYER, HEAD)
        for text in texts[:-1]:
            driver.execute_script(box, text)
            start = time.perf_counter()
            page.find("#show").click()
            page.wait_for(
                lambda d, text=text: (
                    driver.execute_script("return state.result.prompt") == text
                    and page.find("#steps").get_attribute("data-ready") == f"{LAYER},{HEAD},"
                ),
                "the steps",
            )
            shown.append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            page.find(f'#switches input[data-switch="{SWITCH[0]}"]').click()
            page.steps_ready(LAYER, HEAD, "+".join(SWITCH))
            switched.append(1000 * (time.perf_counter() - start))
            page.find(f'#switches input[data-switch="{SWITCH[0]}"]').click()
            page.steps_ready(LAYER, HEAD, "")
    finally:
        driver.quit()
    return {"prompt": statistics.median(shown), "switch": statistics.median(switched)}


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns the exit status."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    explorer = make_explorer(args.vocab_size, args.seed)
    lengths = [int(t) for t in args.lengths.split(",")]
    block_size = explorer.model.config.block_size
    if any(not 1 <= T <= block_size for T in lengths):
        print(f"--lengths must be in 1..{block_size} (block_size)", file=sys.stderr)
        return 2
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = explorer.model.config
    print(
        f"CPU-recipe model: {config.n_layer} layers, {config.n_head} heads, n_embd "
        f"{config.n_embd}, block {block_size}, vocab {config.vocab_size}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads; median of {args.rounds}"
    )
    names = ["forward", "lens", "build", "encode", "http"]
    encodings = args.encodings.split(",")
    header = f"{'T':>4} {'answer':<7}{'encoding':<9}" + "".join(f"{n + ' ms':>11}" for n in names)
    header += f"{'KiB':>8}"
    rows = []
    try:
        # One untimed round first: the first forward pass allocates and warms up.
        time_parts(explorer, server.url, prompts(explorer, lengths[0], 1, -1)[0], False)
        browser = {}
        print(header + (f"{'browser ms':>12}" if args.browser else ""))
        for T in lengths:
            texts = prompts(explorer, T, args.rounds, args.seed + T)
            if args.browser:  # a few rounds (and one untimed): the browser is slow to drive
                extra = prompts(explorer, T, max(4, args.rounds // 4) + 1, args.seed - T)
                browser = time_browser(server.url, extra, T)
            for kind in ("prompt", "switch"):
                for e, encoding in enumerate(encodings):
                    # Prompts new to the server for each encoding: each answer runs the model.
                    fresh = texts if e == 0 else prompts(explorer, T, args.rounds, 1000 * e + T)
                    rounds = [
                        time_parts(explorer, server.url, t, kind == "switch", encoding)
                        for t in fresh
                    ]
                    median = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
                    line = f"{T:>4} {kind:<7}{encoding:<9}"
                    line += "".join(f"{median[n]:>11.1f}" for n in names)
                    line += f"{median['bytes'] / 1024:>8.0f}"
                    if browser and encoding == "json":  # what the page asks today
                        line += f"{browser[kind]:>12.0f}"
                    print(line, flush=True)
                    rows.append((T, f"{kind}, {encoding}", median))
    finally:
        server.shutdown()
        server.server_close()
    T, kind, worst = max(rows, key=lambda r: r[2]["http"])
    inside = {n: worst[n] for n in ("forward", "lens", "build", "encode")}
    top = max(inside, key=inside.get)
    print(
        f"slowest answer: T = {T}, {kind}, {worst['http']:.0f} ms over HTTP; of its parts "
        f"{top} dominates ({inside[top]:.0f} ms; forward {worst['forward']:.0f}, lens "
        f"{worst['lens']:.0f}, build {worst['build']:.0f}, encode {worst['encode']:.0f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
