"""The READMEs' pictures of the attention page, in Korean, taken in headless Chromium.

Train the Korean sample model as README.ko.md says, then run this from the repository root:

    python train.py --config configs/shakespeare_char_cpu.yaml \\
        data.path=data/korean_sample/input.txt out_dir=runs/korean model.dropout=0.2 \\
        train.max_iters=300 train.eval_interval=50 train.ema_start=200 \\
        train.sample_prompt="새가 하늘을" train.attention_prompt="나는 라면을 먹었다"
    python dev/page_screenshots.py --out-dir runs/korean            # writes into docs/

It serves the run as `explore_attention.py --out-dir RUN --serve --lang ko` does, opens
the page in Korean (?lang=ko) in a 1280 x 800 px window, types "나는 라면을 먹었다", picks
layer 3, head 0 and the row of 먹, and writes four palette PNGs (each cropped to the part
that matters, under ~150 KB):

    docs/attention_page.png     the weights table, the next-character table and the heads
    docs/attention_steps.png    the steps from ÷√d_k through the mask, 먹's weight on 면 derived
    docs/attention_block.png    the block: the residual stream, the MLP, what each part pushes
    docs/training_slider.png    the training-step slider at an early snapshot, and the changes

Needs Chromium, chromedriver, selenium and fonts-nanum (Hangul), as the browser tests do.
Not a test: nothing here asserts; pytest does not collect dev/.
"""

import argparse
import io
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "나는 라면을 먹었다"
LAYER, HEAD, ROW = 3, 0, 7  # row 7 is 먹
CELL = (7, 4)  # 먹's weight on 면: the derivation kept in the steps picture
WIDTH, HEIGHT = 1280, 800  # px: the window the pictures are taken in
COLOURS = 128  # of the palette PNGs: fewer turn the pale blues and reds grey
WAIT_SECONDS = 60
PAD = 8  # px kept around each band of a picture


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(out_dir: str, port: int) -> subprocess.Popen:
    """explore_attention.py --serve in Korean on 127.0.0.1:port, once it answers."""
    command = [sys.executable, str(ROOT / "explore_attention.py"), "--out-dir", out_dir]
    command += ["--serve", "--lang", "ko", "--port", str(port)]
    server = subprocess.Popen(command)  # in our folder: --out-dir as typed
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server stopped (exit {server.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError("the server did not answer")


def open_browser():
    """Headless Chromium in Korean, WIDTH x HEIGHT px."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    # Named here so that selenium does not go looking for a browser on the network.
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)  # --no-sandbox: Chromium refuses to run as root without it
    options.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    options.add_argument("--lang=ko-KR")
    driver = webdriver.Chrome(
        options=options, service=Service(executable_path=shutil.which("chromedriver"))
    )
    set_viewport(driver, HEIGHT)
    return driver


def set_viewport(driver, height: int) -> None:
    metrics = {"width": WIDTH, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)


def wait_for(driver, condition, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS).until(condition, f"timed out waiting for {what}")


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def steps_key(driver) -> str:
    return js(driver, "return document.getElementById('steps').getAttribute('data-ready')")


def show_prompt(driver, url: str) -> None:
    """Open the page in Korean, show PROMPT at LAYER, HEAD and ROW, temperature 0.8."""
    from selenium.webdriver.common.by import By

    driver.get(url + "?lang=ko")
    wait_for(driver, lambda d: d.find_element(By.ID, "model").text, "the page to start")
    box = driver.find_element(By.ID, "prompt")
    box.clear()
    box.send_keys(PROMPT)
    driver.find_element(By.ID, "show").click()
    wait_for(
        driver,
        lambda d: js(d, "return !!document.querySelector('#attention-table tr')"),
        "the table",
    )
    driver.find_element(By.CSS_SELECTOR, f'#layers button[data-value="{LAYER}"]').click()
    driver.find_element(By.CSS_SELECTOR, f'#heads button[data-value="{HEAD}"]').click()
    wait_for(driver, lambda d: steps_key(d) == f"{LAYER},{HEAD},", "the steps of the head")
    driver.find_element(By.CSS_SELECTOR, f'#attention-table tbody tr[data-row="{ROW}"]').click()
    js(
        driver,
        "const t = document.getElementById('temperature');"
        "t.value = '0.8'; t.dispatchEvent(new Event('input'));",
    )
    time.sleep(0.5)


def band(driver, top_css: str, bottom_css: str, pad: int) -> tuple[int, int]:
    """(top, bottom) px from the page's top: from ``top_css``'s top to ``bottom_css``'s
    bottom, ``pad`` px around."""
    return js(
        driver,
        "const y = window.scrollY;"
        "const a = document.querySelector(arguments[0]).getBoundingClientRect();"
        "const b = document.querySelector(arguments[1]).getBoundingClientRect();"
        "return [Math.floor(a.top + y) - arguments[2], Math.ceil(b.bottom + y) + arguments[2]];",
        top_css,
        bottom_css,
        pad,
    )


def save_bands(driver, path: Path, bands: list[tuple]) -> int:
    """The page's bands ((top css, bottom css), or with a pad in px: PAD by default),
    WIDTH wide, stacked with a grey rule between them, as a palette PNG at ``path``;
    returns its size in bytes.

    The page is drawn whole in one viewport as tall as it is; the bands are measured
    there, since the steps' side panel is sized by the window's height."""
    from PIL import Image, ImageDraw

    js(driver, "window.scrollTo(0, 0)")
    full = js(driver, "return document.documentElement.scrollHeight")
    set_viewport(driver, max(full, HEIGHT))
    time.sleep(0.3)
    spans = [band(driver, *part, PAD) if len(part) == 2 else band(driver, *part) for part in bands]
    png = driver.get_screenshot_as_png()
    set_viewport(driver, HEIGHT)
    page = Image.open(io.BytesIO(png)).convert("RGB")
    pieces = [page.crop((0, top, WIDTH, bottom)) for top, bottom in spans]
    rule = 9
    image = Image.new(
        "RGB", (WIDTH, sum(p.height for p in pieces) + rule * (len(pieces) - 1)), "white"
    )
    y = 0
    for k, piece in enumerate(pieces):
        if k:
            ImageDraw.Draw(image).line(
                [(0, y - rule // 2 - 1), (WIDTH, y - rule // 2 - 1)], fill="#9ca3af", width=3
            )
        image.paste(piece, (0, y))
        y += piece.height + rule
    return save_palette(image, path)


def save_palette(image, path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=COLOURS).save(path, optimize=True)
    return path.stat().st_size


def shot_page(driver, url: str, path: Path) -> int:
    """The weights table of 먹's row, the next characters and the heads compared."""
    show_prompt(driver, url)
    return save_bands(driver, path, [("h1", "#show", 3), ("#layers", "#heads-view")])


def shot_steps(driver, url: str, path: Path) -> int:
    """A 1280 x 800 window scrolled to ÷√d_k, 먹's weight on 면 derived beside."""
    from PIL import Image
    from selenium.webdriver.common.by import By

    show_prompt(driver, url)
    i, j = CELL
    cell = f"#steps table[data-step='weights'] td[data-i='{i}'][data-j='{j}']"
    driver.find_element(By.CSS_SELECTOR, cell).click()
    wait_for(
        driver,
        lambda d: (
            js(
                d,
                "const b = document.getElementById('derivation');"
                "return b.dataset.i + ',' + b.dataset.j",
            )
            == f"{i},{j}"
        ),
        "the derivation",
    )
    # The step's heading (above its card) in view too.
    js(
        driver,
        "document.querySelector(\"#steps .step[data-step='scaled']\").scrollIntoView();"
        "window.scrollBy(0, -34);",
    )
    time.sleep(0.3)
    png = driver.get_screenshot_as_png()
    return save_palette(Image.open(io.BytesIO(png)).convert("RGB"), path)


def shot_block(driver, url: str, path: Path) -> int:
    """The block section: the residual stream, the MLP, what each head and MLP pushes."""
    show_prompt(driver, url)
    card = "#block .step[data-step='{}']"
    bands = [
        ("#block-title", card.format("block_mid")),
        (card.format("down"), card.format("down"), 3),
        ("#attribution", "#attribution"),
    ]
    return save_bands(driver, path, bands)


def shot_training(driver, url: str, path: Path, step: int) -> int:
    """The slider at the snapshot nearest ``step``, its sample and changes, the table."""
    show_prompt(driver, url)
    steps = js(driver, "return training.snapshots.map(s => s.step)")
    position = min(range(len(steps)), key=lambda k: abs(steps[k] - step))
    before = js(driver, "return document.getElementById('table-title').textContent")
    js(
        driver,
        "const s = document.getElementById('training-step');"
        "s.value = String(arguments[0]); s.dispatchEvent(new Event('input'));",
        position,
    )
    wait_for(
        driver,
        lambda d: js(d, "return document.getElementById('table-title').textContent") != before,
        "the tables at the snapshot",
    )
    wait_for(
        driver,
        lambda d: js(d, "return !!document.querySelector('#snapshot-changes table')"),
        "the changes view",
    )
    time.sleep(0.5)
    return save_bands(driver, path, [("#training-section", ".panels")])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", default="runs/korean", help="the Korean sample's run folder")
    p.add_argument("--docs", default=str(ROOT / "docs"), help="where the PNGs go")
    p.add_argument("--early-step", type=int, default=21, help="the slider picture's snapshot")
    p.add_argument(
        "--only", default="page,steps,block,training", help="which pictures, comma-separated"
    )
    args = p.parse_args(argv)
    docs = Path(args.docs)
    port = free_port()
    server = start_server(args.out_dir, port)
    driver = open_browser()
    url = f"http://127.0.0.1:{port}/"
    shots = {
        "page": lambda: shot_page(driver, url, docs / "attention_page.png"),
        "steps": lambda: shot_steps(driver, url, docs / "attention_steps.png"),
        "block": lambda: shot_block(driver, url, docs / "attention_block.png"),
        "training": lambda: shot_training(
            driver, url, docs / "training_slider.png", args.early_step
        ),
    }
    try:
        for name in re.split(r"\s*,\s*", args.only):
            size = shots[name]()
            print(f"{name}: {size / 1024:.0f} KiB")
    finally:
        driver.quit()
        server.terminate()
        server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
