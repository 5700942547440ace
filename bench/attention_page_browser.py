"""The attention explorer's page in a real browser: headless Chromium driven by selenium.

    python bench/attention_page_browser.py --out-dir runs/korean_small \\
        --prompt "새가 하늘을 날았다" --screenshot runs/attention_page.png

Serves the run's checkpoint on a free port of 127.0.0.1 (as `explore_attention.py
--serve` does), opens the page, types the prompt and checks what a learner sees: a table
with one row per character holding the CLI's numbers, a head button that changes it, a
clicked row compared across the heads, next-character probabilities equal to
softmax(logits / temperature), "append" continuing the prompt, and a bad prompt shown as
a message (as text, not HTML) with the previous prompt's table hidden. Then the steps
(`check_steps`): the chapters' presets, every step's table with the explorer's numbers
and its Hangul drawn, a clicked cell's derivation matching the tables, hover and lock,
a what-if switch that changes the next-character table and restores it, and what each
layer would predict; and that the page asked nothing of any host but 127.0.0.1
(`check_network`). Prints one line per check; exits 1 if one fails. With --screenshot
it then writes a PNG of the page (palette colours, to keep it small), and with
--steps-screenshot one of the steps with a kept derivation.

Needs Chromium, its driver and selenium; on Debian or Ubuntu:

    apt-get install -y chromium chromium-driver fonts-nanum    # fonts-nanum: Hangul
    python -m venv --system-site-packages .venv-browser
    .venv-browser/bin/pip install selenium

Without them it says what is missing and exits 0. The checks live in
tests/viz/page_checks.py (the browser's driver in tests/viz/browser.py);
tests/viz/test_attention_page_browser.py runs them on a tiny model (and skips where the
browser is missing).
docs/attention_page.png was made with this script (see docs/attention_walkthrough.md).
"""

import argparse
import io
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.viz.browser import Page, browser_missing, hangul_fonts, open_browser  # noqa: E402
from tests.viz.page_checks import check_network, check_page, check_steps  # noqa: E402
from viz.attention_presets import run_prompts  # noqa: E402
from viz.attention_server import AttentionExplorer, ExplorerServer  # noqa: E402


def screenshot(page: Page, url: str, prompt: str, path: Path, head: int, row: int) -> int:
    """The page after typing ``prompt``, picking ``head`` of the last layer and ``row``,
    at temperature 0.8, from its top down to the steps, written to ``path`` as a palette
    PNG; returns its size in bytes."""
    page.open(url)
    page.show(prompt)
    page.click(f'#heads button[data-value="{head}"]')
    page.find(f'#attention-table tbody tr[data-row="{row}"]').click()  # may be picked already
    page.set_temperature(0.8)
    # The page down to the steps (those have their own picture): a viewport that tall.
    width, height = page.driver.execute_script(
        "return [document.documentElement.clientWidth, Math.ceil(window.scrollY + "
        "document.getElementById('steps-section').getBoundingClientRect().top)]"
    )
    return save_viewport(page, path, width, height)


def save_viewport(page: Page, path: Path, width: int, height: int) -> int:
    """The page as a width x height px viewport shows it from its top, written to
    ``path`` as a palette PNG (COLOURS colours); returns its size in bytes."""
    from PIL import Image

    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    page.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        png = page.driver.get_screenshot_as_png()
    finally:
        page.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    image = Image.open(io.BytesIO(png)).convert("RGB")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=COLOURS).save(path, optimize=True)
    return path.stat().st_size


COLOURS = 128  # of the palette PNGs: fewer turn the pale blues and reds grey
STEPS_SHOT = (1200, 1150)  # the steps picture's viewport, px: three tables and a derivation


def steps_screenshot(page: Page, url: str, prompt: str, path: Path, head: int, cell) -> int:
    """The steps of ``head`` in the last layer for ``prompt``, scrolled to ÷√d_k, the
    mask and the softmax, with the derivation of weights[i][j] (``cell``) kept beside,
    in a STEPS_SHOT viewport, as a palette PNG at ``path``; returns its size in bytes."""
    from PIL import Image

    page.open(url)
    page.show(prompt)
    page.find(f'#heads button[data-value="{head}"]').click()
    layer = page.driver.execute_script("return state.layer")
    page.steps_ready(layer, head)
    i, j = cell
    page.find(f"#steps table[data-step='weights'] td[data-i='{i}'][data-j='{j}']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", str(i), str(j)), "the derivation")
    width, height = STEPS_SHOT
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    page.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    page.driver.execute_script(
        "document.querySelector(\"#steps .step[data-step='scaled']\").scrollIntoView();"
        "const side = document.getElementById('side');"
        "side.scrollTop = document.getElementById('derivation').offsetTop;"
    )
    png = page.driver.get_screenshot_as_png()
    page.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    image = Image.open(io.BytesIO(png)).convert("RGB")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=COLOURS).save(path, optimize=True)
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    """Run the checks (and the screenshot); returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", default="runs/korean_small", help="run folder with ckpt.pt")
    p.add_argument("--checkpoint", default="ckpt.pt", help="file name in --out-dir, or a path")
    p.add_argument("--prompt", default="새가 하늘을 날았다", help="the text to type")
    p.add_argument("--screenshot", default=None, help="write a PNG of the page here")
    p.add_argument("--head", type=int, default=0, help="head picked for the screenshot")
    p.add_argument("--row", type=int, default=None, help="row picked (default: the last)")
    p.add_argument(
        "--steps-screenshot", default=None, help="write a PNG of the steps (last layer, --head)"
    )
    p.add_argument(
        "--cell",
        default=None,
        help="i,j: the weight whose derivation the steps screenshot keeps (default: the "
        "last row, column 0)",
    )
    args = p.parse_args(argv)
    missing = browser_missing()
    if missing:
        print(f"skipped: {missing}")
        return 0
    from cli.checkpoint_args import resolve_checkpoint_path
    from model.checkpoint import load_checkpoint, model_from_checkpoint

    path = resolve_checkpoint_path(args.out_dir, args.checkpoint)
    checkpoint = load_checkpoint(path)
    model, tokenizer = model_from_checkpoint(checkpoint, path)
    own_text = run_prompts(checkpoint.get("config"))
    explorer = AttentionExplorer(model, tokenizer, str(path), own_text)
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = open_browser()
    try:
        print(f"Hangul fonts installed: {', '.join(hangul_fonts()) or 'none'}")
        for line in check_page(Page(driver), server.url, explorer, args.prompt):
            print(f"ok  {line}")
        if len(args.prompt) <= 16:
            for line in check_steps(Page(driver), server.url, explorer, args.prompt):
                print(f"ok  {line}")
        print(f"ok  {check_network(Page(driver), server.url)}")
        if args.screenshot:
            row = len(args.prompt) - 1 if args.row is None else args.row
            size = screenshot(
                Page(driver), server.url, args.prompt, Path(args.screenshot), args.head, row
            )
            print(f"wrote {args.screenshot}: {size / 1024:.0f} KiB")
        if args.steps_screenshot:
            T = len(args.prompt)
            cell = tuple(map(int, args.cell.split(","))) if args.cell else (T - 1, 0)
            size = steps_screenshot(
                Page(driver), server.url, args.prompt, Path(args.steps_screenshot), args.head, cell
            )
            print(f"wrote {args.steps_screenshot}: {size / 1024:.0f} KiB")
    except AssertionError as e:
        print(f"FAILED {e}")
        return 1
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
