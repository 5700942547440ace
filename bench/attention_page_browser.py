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

Without them it says what is missing and exits 0. tests/viz/test_attention_page_browser.py
runs the same checks on a tiny model (and skips where the browser is missing).
docs/attention_page.png was made with this script (see docs/attention_walkthrough.md).
"""

import argparse
import io
import math
import shutil
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402  (needs the path above)

from viz.attention_presets import run_prompts  # noqa: E402
from viz.attention_server import AttentionExplorer, ExplorerServer  # noqa: E402
from viz.attention_table import format_attention_table  # noqa: E402
from viz.attention_weights import select_head  # noqa: E402

WAIT_SECONDS = 20
# Python's own rounding, which the CLI's table uses; the page must print the same.
ROUNDING_PROBES = [0.0, 1.0, 0.125, 0.375, 0.625, 0.875, 0.005, 0.015, 0.994999, 0.995, 1 / 3]


def browser_missing() -> str | None:
    """Why the browser checks cannot run here (None when they can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    if chromium_paths() is None:
        return (
            "Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)"
        )
    return None


def chromium_paths() -> tuple[str, str] | None:
    """(browser, driver) executables found on PATH, or None."""
    browser = next(
        (
            p
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (p := shutil.which(name))
        ),
        None,
    )
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def hangul_fonts() -> list[str]:
    """Font families fontconfig says cover Korean (what Chromium can draw Hangul with)."""
    try:
        listed = subprocess.run(
            ["fc-list", ":lang=ko", "family"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted({line.split(",")[0].strip() for line in listed.splitlines() if line.strip()})


def open_browser(width: int = 1200, height: int = 1000):
    """A headless Chromium session (selenium WebDriver) with a window of width x height px.

    Raises:
        RuntimeError: if Chromium or its driver is missing.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    if paths is None:
        raise RuntimeError(browser_missing())
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)  # --no-sandbox: Chromium refuses to run as root without it
    options.add_argument(f"--window-size={width},{height}")
    options.add_argument("--lang=en-US")
    # DevTools' network events and the console (where a refused request is reported),
    # read back by `check_network`.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=paths[1]))


class Page:
    """The explorer page open in a WebDriver session: what a learner does, and reads."""

    def __init__(self, driver):
        self.driver = driver

    def find(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def wait_for(self, condition, what: str):
        """Wait up to WAIT_SECONDS for ``condition(driver)`` to be truthy.

        Raises:
            AssertionError: naming ``what`` if it never is.
        """
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, WAIT_SECONDS).until(condition)
        except TimeoutException:
            raise AssertionError(f"timed out waiting for {what}") from None

    def open(self, url: str) -> None:
        self.driver.get(url)
        self.wait_for(lambda d: self.find("#model").text, "the page to start")

    def show(self, prompt: str) -> None:
        """Type ``prompt`` into the box (as keystrokes) and press the button."""
        box = self.find("#prompt")
        box.clear()
        box.send_keys(prompt)
        before = self.message_and_rows()
        self.find("#show").click()
        self.wait_for(
            lambda d: self.message_and_rows() != before and "Computing" not in self.message(),
            f"the page to answer {prompt!r}",
        )

    def message(self) -> str:
        return self.find("#message").text

    def message_and_rows(self) -> tuple:
        return self.message(), self.table_text()

    def table_text(self) -> str:
        return self.driver.execute_script(
            "return document.getElementById('attention-table').textContent"
        )

    def table_rows(self) -> list[list[str]]:
        """The shown weights, row by row: the texts of the non-blank cells, sum included."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#attention-table tbody tr')].map("
            "  tr => [...tr.querySelectorAll('td')].filter(td => !td.classList.contains('future'))"
            "  .map(td => td.textContent))"
        )

    def click(self, css: str) -> None:
        before = self.table_text() + self.find("#heads-view").text
        self.find(css).click()
        self.wait_for(
            lambda d: self.table_text() + self.find("#heads-view").text != before,
            f"a click on {css} to change the page",
        )

    def heads_view(self) -> list[list[str]]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll('#heads-view tbody tr')].map("
            "  tr => [...tr.querySelectorAll('td')].map(td => td.textContent))"
        )

    def set_temperature(self, value: float) -> None:
        self.driver.execute_script(
            "const t = document.getElementById('temperature');"
            "t.value = arguments[0]; t.dispatchEvent(new Event('input'));",
            str(value),
        )

    def next_chars(self) -> list[tuple[str, float]]:
        """(label, exact probability) of each listed next character, likeliest first."""
        rows = self.driver.execute_script(
            "return [...document.querySelectorAll('#next-table tbody tr')].map(tr => "
            "[tr.querySelector('.char').textContent, tr.querySelector('.probability').title])"
        )
        return [(label, float(p)) for label, p in rows]

    def drawn_text(self, css: str) -> list[tuple[str, list[str], float, float]]:
        """What Chromium drew for each element matching ``css``: (its text, the font
        families its glyphs came from (DevTools' CSS.getPlatformFontsForNode), the
        text's rendered width in px, its font size in px)."""
        send = self.driver.execute_cdp_cmd
        send("DOM.enable", {})
        send("CSS.enable", {})
        root = send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        ids = send("DOM.querySelectorAll", {"nodeId": root, "selector": css})["nodeIds"]
        fonts = [send("CSS.getPlatformFontsForNode", {"nodeId": i})["fonts"] for i in ids]
        measured = self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(el => {"
            "  const range = document.createRange(); range.selectNodeContents(el);"
            "  return [el.textContent, range.getBoundingClientRect().width,"
            "          parseFloat(getComputedStyle(el).fontSize)]; })",
            css,
        )
        return [
            (text, [f["familyName"] for f in used], width, size)
            for (text, width, size), used in zip(measured, fonts, strict=True)
        ]

    def steps_ready(self, layer: int, head: int, switches: str = "") -> None:
        """Wait until the steps of ``layer`` and ``head`` (under ``switches``, joined by
        '+') are drawn."""
        want = f"{layer},{head},{switches}"
        self.wait_for(
            lambda d: self.find("#steps").get_attribute("data-ready") == want,
            f"the steps of layer {layer}, head {head} {switches}",
        )

    def step_cells(self, key: str) -> list[list[tuple[str, str]]]:
        """A step's number table: (text, exact value in the title) of each cell, by row."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll("
            "  `#steps table[data-step='${arguments[0]}'] tbody tr`)].map("
            "  tr => [...tr.querySelectorAll('td')].map(td => [td.textContent, td.title]))",
            key,
        )

    def heatmap_event(self, key: str, i: int, j: int, kind: str = "mousemove") -> str:
        """Send a mouse event (mousemove or click) to cell (i, j) of a step's heatmap;
        returns the tooltip's text ("row ... : value")."""
        return self.driver.execute_script(
            "const c = document.querySelector(`#steps canvas[data-step='${arguments[0]}']`);"
            "const box = c.getBoundingClientRect();"
            "const x = box.left + Number(c.dataset.left) + (arguments[2] + 0.5) * c.dataset.cellW;"
            "const y = box.top + Number(c.dataset.top) + (arguments[1] + 0.5) * c.dataset.cellH;"
            "const at = {clientX: x, clientY: y, bubbles: true};"
            "c.dispatchEvent(new MouseEvent(arguments[3], at));"
            "return document.getElementById('tip').textContent;",
            key,
            i,
            j,
            kind,
        )

    def derivation(self) -> dict[str, tuple[str, float]]:
        """The derivation panel's results: {role: (text, exact value)}."""
        found = self.driver.execute_script(
            "return [...document.querySelectorAll('#derivation .result')].map("
            "  r => [r.dataset.role, r.textContent, r.dataset.exact])"
        )
        return {role: (text, float(exact)) for role, text, exact in found}

    def derivation_cell(self) -> tuple[str, str, str]:
        box = self.find("#derivation")
        return (
            box.get_attribute("data-kind"),
            box.get_attribute("data-i"),
            box.get_attribute("data-j"),
        )

    def hover(self, css: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).move_to_element(self.find(css)).perform()

    def format_fixed(self, values: list[float], decimals: int) -> list[str]:
        return self.driver.execute_script(
            "return arguments[0].map(x => formatFixed(x, arguments[1]))", values, decimals
        )


def cli_numbers(explorer: AttentionExplorer, prompt: str, layer: int, head: int | None):
    """The numbers of the CLI's table (2 decimals), row by row, the row sum last."""
    result = explorer.explain(prompt)
    weights = torch.tensor(result["weights"])
    table = format_attention_table(select_head(weights, layer, head), prompt)
    # Each row: index, character label (␣ for a space: one word), weights..., sum.
    return [row.split()[2:] for row in table.splitlines()[2:]]


def check_page(page: Page, url: str, explorer: AttentionExplorer, prompt: str) -> list[str]:
    """Run the checks on the served page; returns one line per check passed.

    Raises:
        AssertionError: at the first check that fails, saying what was seen.
    """
    done = []
    info = explorer.model_info()
    last_layer, n_head = info["n_layer"] - 1, info["n_head"]
    page.open(url)
    assert page.driver.title == "Attention explorer", page.driver.title
    assert info["name"] in page.find("#model").text
    done.append(f"page loads: {page.find('#model').text}")

    page.show(prompt)
    T = len(prompt)
    rows = page.table_rows()
    expected = cli_numbers(explorer, prompt, last_layer, None)
    assert len(rows) == T and all(len(r) == i + 2 for i, r in enumerate(rows)), rows
    assert rows == expected, (rows, expected)
    labels = page.driver.execute_script(
        "return [...document.querySelectorAll('#attention-table thead th.char')]"
        ".map(th => th.textContent)"
    )
    assert labels == [c if c != " " else "␣" for c in prompt], labels
    done.append(f"typed {prompt!r}: {T} rows, the CLI's numbers (layer {last_layer}, average)")
    done.append(check_hangul_drawn(page, "#attention-table thead th.char"))

    page.click('#heads button[data-value="1"]')
    head_rows = page.table_rows()
    assert head_rows == cli_numbers(explorer, prompt, last_layer, 1), head_rows
    assert head_rows != rows and "head 1" in page.find("#table-title").text
    done.append("clicking head 1 changes the table to the CLI's head 1 table")

    page.click('#layers button[data-value="0"]')
    assert page.table_rows() == cli_numbers(explorer, prompt, 0, 1)
    picked = min(3, T - 1)
    page.click(f'#attention-table tbody tr[data-row="{picked}"]')
    side = page.heads_view()
    result = explorer.explain(prompt)
    for h in range(n_head):
        want = [f"{w:.2f}" for w in result["weights"][0][h][picked][: picked + 1]]
        assert side[h] == want, (h, side[h], want)
    assert len(side) == n_head + 1  # and the average
    done.append(f"clicking row {picked} shows it in all {n_head} heads of layer 0 side by side")

    logits = torch.tensor(result["logits"], dtype=torch.float64)
    for temperature in (0.5, 1.0, 1.5):
        page.set_temperature(temperature)
        shown = page.next_chars()
        probs = torch.softmax(logits / temperature, dim=-1)
        top = probs.topk(len(shown))
        assert [label for label, _ in shown] == [info["vocab_labels"][i] for i in top.indices]
        exact = [p for _, p in shown]
        assert all(math.isclose(p, q, abs_tol=1e-9) for p, q in zip(exact, top.values, strict=True))
    page.set_temperature(0)
    shown = page.next_chars()
    assert shown[0] == (info["vocab_labels"][int(logits.argmax())], 1.0)
    # Greedy: still ranked by the logits (not in vocabulary order after the first).
    ranked = torch.sort(logits, descending=True, stable=True).indices[: len(shown)]
    assert [label for label, _ in shown] == [info["vocab_labels"][i] for i in ranked]
    assert {p for _, p in shown[1:]} == {0.0}
    assert "greedy" in page.find("#temperature-help").text
    done.append("next-character probabilities = softmax(logits / T) for T = 0.5, 1, 1.5; 0 greedy")

    assert page.format_fixed(ROUNDING_PROBES, 2) == [f"{x:.2f}" for x in ROUNDING_PROBES]
    done.append("2-decimal rounding matches Python's (ties such as 0.125 to even)")

    page.set_temperature(1)
    first = page.next_chars()[0][0]
    page.click("#next-table tbody tr:first-child button")
    page.wait_for(lambda d: len(page.table_rows()) == min(T + 1, info["block_size"]), "append")
    grown = page.find("#prompt").get_attribute("value")
    assert grown == prompt + info["vocab"][info["vocab_labels"].index(first)], grown
    done.append(f"append {first!r}: the prompt and table grow by one character")

    page.show("<b>x</b>")
    message = page.message()
    assert "not in the model's vocabulary" in message and "'<' (U+003C)" in message, message
    assert not page.find_all("#message b") and page.find("#message p.error")
    assert not page.find("#explorer").is_displayed(), "the previous prompt's table is still shown"
    page.show("")
    assert page.message() == "the prompt is empty: type at least one character"
    page.show(prompt)
    assert page.find("#explorer").is_displayed() and len(page.table_rows()) == T
    done.append("bad prompts give the server's message, shown as text, and hide the old table")
    return done


def shown(value: float | None, decimals: int = 2) -> str:
    """A step's value as the page and the CLI print it (-inf, sent as None, is −∞)."""
    return "−∞" if value is None else f"{value:.{decimals}f}"


def exact(title: str) -> float:
    """A cell's exact value from its hover title ('−∞ ...' is -inf)."""
    word = title.split()[0]
    return -math.inf if word == "−∞" else float(word)


def check_steps(page: Page, url: str, explorer: AttentionExplorer, prompt: str) -> list[str]:
    """Check the step-by-step view on the served page, for layer 0 and head 1 of a
    prompt of at most 16 characters (tables of numbers, not heatmaps). Returns one line
    per check passed.

    Raises:
        AssertionError: at the first check that fails, saying what was seen.
    """
    done = []
    info = explorer.model_info()
    T = len(prompt)
    assert T <= 16, "check_steps reads the tables as numbers: a prompt of at most 16 characters"
    page.open(url)
    presets = {p["text"]: p for p in info["presets"]}
    if prompt in presets:  # a chapter's sentence: picked with its button
        button = page.find(f'#presets button[data-preset="{prompt}"]')
        before = page.message_and_rows()
        button.click()
        page.wait_for(lambda d: page.message_and_rows() != before, "the preset's tables")
        lacking = [p for p in info["presets"] if p["missing"]]
        for p in lacking:
            other = page.find(f'#presets button[data-preset="{p["text"]}"]')
            assert not other.is_enabled() and "".join(p["missing"][:1]) in other.get_attribute(
                "title"
            ), (p, other.get_attribute("title"))
        done.append(
            f"preset {prompt!r} shows its tables; the sentences with characters the model "
            f"lacks ({len(lacking)}) are offered disabled, naming them"
        )
    else:
        page.show(prompt)
    assert page.find("#prompt").get_attribute("value") == prompt

    layer, head = 0, 1
    page.click(f'#layers button[data-value="{layer}"]')
    page.find(f'#heads button[data-value="{head}"]').click()
    page.steps_ready(layer, head)
    own = explorer.steps(prompt, layer, head)
    order = page.driver.execute_script(
        "return [...document.querySelectorAll('#steps .step')].map(s => s.dataset.step)"
    )
    assert order == own["order"], order
    chapters = page.driver.execute_script(
        "return [...document.querySelectorAll('#steps h3')].map(h => h.textContent)"
    )
    assert [c.split(" · ")[0] for c in chapters] == [f"Step {n}" for n in range(1, 10)], chapters
    steps = {**own["layer_steps"], **own["heads"][str(head)]}
    compared, hovered = [], []
    for key, step in steps.items():
        rows, cols = step["shape"]
        if cols > 16:  # a heatmap: its values are in the tooltips
            for i, j in ((0, 0), (rows - 1, cols - 1), (rows // 2, cols // 2)):
                tip = page.heatmap_event(key, i, j)
                value = step["values"][i][j]
                assert exact(tip.rsplit(": ", 1)[1]) == (-math.inf if value is None else value)
            hovered.append(key)
            continue
        cells = page.step_cells(key)
        texts = [[text for text, _ in row] for row in cells]
        assert texts == [[shown(v) for v in row] for row in step["values"]], key
        titles = [[exact(title) for _, title in row] for row in cells]
        want = [[-math.inf if v is None else v for v in row] for row in step["values"]]
        assert titles == want, key
        compared.append(key)
    assert {"scores", "scaled", "masked", "weights"} <= set(compared)
    assert len(compared) + len(hovered) == len(order)
    masked = page.step_cells("masked")
    assert masked[0][1][0] == "−∞" and page.step_cells("weights")[0][1][0] == "0.00"
    done.append(
        f"the 9 steps in order, {len(order)} tables; {len(compared)} tables of numbers equal "
        f"the explorer's (−∞ before the softmax, 0.00 after); {len(hovered)} heatmaps give "
        "its values on hover"
    )
    done.append(check_hangul_drawn(page, "#steps table[data-step='weights'] tbody th.char"))

    # A weight's derivation, kept by a click.
    i, j = min(5, T - 1), min(2, T - 1)
    cell = f"#steps table[data-step='weights'] td[data-i='{i}'][data-j='{j}']"
    page.find(cell).click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", str(i), str(j)), "the derivation")
    found = page.derivation()
    table = {key: page.step_cells(key)[i][j] for key in ("scores", "scaled", "weights")}
    assert found["model-score"][1] == exact(table["scores"][1])
    assert found["model-scaled"][1] == exact(table["scaled"][1])
    assert found["model-weight"][1] == exact(table["weights"][1])
    assert math.isclose(found["sum"][1], found["model-score"][1], rel_tol=1e-5, abs_tol=1e-5)
    assert math.isclose(found["scaled"][1], found["model-scaled"][1], rel_tol=1e-5, abs_tol=1e-6)
    assert math.isclose(found["weight"][1], found["model-weight"][1], abs_tol=1e-6)
    assert found["model-weight"][0].endswith(f"{found['model-weight'][1]:.4f}")
    products = page.driver.execute_script(
        "return document.querySelectorAll('#derivation [data-role=product]').length"
    )
    assert products == info["d_k"]
    done.append(
        f"clicking weights[{i}][{j}] shows q·k over {products} channels, ÷√d_k, the row's "
        "softmax: each result equals the tables' number"
    )

    # Hover previews only while nothing is kept; Unlock lets the mouse lead again.
    page.hover("#steps table[data-step='scores'] td[data-i='1'][data-j='0']")
    assert page.derivation_cell() == ("cell", str(i), str(j)), "a hover moved a kept derivation"
    page.find("#unlock").click()
    page.wait_for(lambda d: not page.find_all("#unlock"), "Unlock to release the derivation")
    page.hover("#steps table[data-step='scores'] td[data-i='1'][data-j='0']")
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "1", "0"), "the hover preview")
    assert not page.find_all("#unlock")
    future = f"#steps table[data-step='masked'] td[data-i='0'][data-j='{T - 1}']"
    page.find(future).click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "0", str(T - 1)), "a future cell")
    assert "−∞" in page.find("#derivation [data-role=mask]").text
    assert page.derivation()["model-weight"][1] == 0.0 == page.derivation()["weight"][1]
    done.append("hover previews, a click keeps, Unlock releases; a future cell shows −∞, weight 0")
    # X·Xᵀ is the chapter's form, not a step of the model: its numbers are not the model's.
    page.find(f"#steps table[data-step='xx_weights'] td[data-i='{T - 1}'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("xx", str(T - 1), "0"), "X·Xᵀ's cell")
    for text, _ in page.derivation().values():
        assert "the model's" not in text, f"an X·Xᵀ number called the model's: {text!r}"
    assert "X·Xᵀ" in page.derivation()["model-weight"][0]

    # A row of weights·V: the weighted values and their sum.
    row = T - 1
    if steps["out"]["shape"][1] > 16:
        page.heatmap_event("out", row, 0, "click")
    else:
        page.find(f"#steps table[data-step='out'] td[data-i='{row}'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell()[:2] == ("row", str(row)), "the row's sum")
    sums = page.driver.execute_script(
        "return [...document.querySelectorAll('#derivation [data-role=out-sum]')]"
        ".map(td => [Number(td.dataset.exact), Number(td.nextElementSibling.dataset.exact)])"
    )
    out_row = steps["out"]["values"][row]
    assert [model for _, model in sums] == out_row
    assert all(math.isclose(a, b, abs_tol=1e-5) for a, b in sums), sums
    done.append(f"clicking row {row} of weights·V sums weights[{row}][j]·v_j to the model's row")
    page.find("#unlock").click()

    # A what-if switch: marked, changes the next characters, and off restores them.
    before = page.next_chars()
    lens_rows = lens_cells(page, T - 1)
    assert [label for label, _ in lens_rows[-1]] == [label for label, _ in before[:5]]
    assert all(
        math.isclose(p, q, abs_tol=1e-9)
        for (_, p), (_, q) in zip(lens_rows[-1], before[:5], strict=True)
    )
    assert len(lens_rows) == info["n_layer"]
    done.append(
        f"what each layer would predict: {len(lens_rows)} layers; after the last block, the "
        "next-character table's 5 likeliest"
    )
    page.find('#switches input[data-switch="uniform"]').click()
    page.steps_ready(layer, head, "uniform")
    assert page.find("#whatif-banner").is_displayed()
    assert "not what the model computes" in page.find("#whatif-banner").text
    assert "what-if" in page.find("#next-title").text
    switched = page.next_chars()
    assert switched != before, "the switch left the next characters as they were"
    answer = explorer.explain(prompt, 1.0, explorer.what_if(layer, head, ["uniform"]))
    served = [(n["label"], n["probability"]) for n in answer["next"]]
    assert [label for label, _ in served] == [label for label, _ in switched]
    assert all(
        math.isclose(p, q, abs_tol=1e-9) for (_, p), (_, q) in zip(served, switched, strict=True)
    ), "the next characters are not the what-if pass's"
    own_column = page.driver.execute_script(
        "return [...document.querySelectorAll('#next-table tbody td.own')].map(td => td.title)"
    )
    own_probs = {label: p for label, p in before}
    for (label, _), p in zip(switched, own_column, strict=True):
        if label in own_probs:
            assert math.isclose(float(p), own_probs[label], abs_tol=1e-9), (label, p)
    weights = page.step_cells("weights")
    assert [text for text, _ in weights[3][:4]] == ["0.25"] * 4
    # Under a switch the tables are the what-if's: the derivation must not call them the
    # model's.
    page.find("#steps table[data-step='weights'] td[data-i='3'][data-j='1']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "3", "1"), "the derivation")
    for text, _ in page.derivation().values():
        assert "the model's" not in text, f"a what-if number called the model's: {text!r}"
    assert "what-if" in page.derivation()["model-weight"][0]
    if steps["out"]["shape"][1] > 16:
        page.heatmap_event("out", 3, 0, "click")
    else:
        page.find("#steps table[data-step='out'] td[data-i='3'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell()[:2] == ("row", "3"), "the row's sum")
    header = page.find("#derivation [data-role=weighted-sum] thead th:nth-child(3)").text
    assert header == "the what-if's", header
    last_block = page.find(f"#lens table[data-position='{T - 1}'] tbody tr:last-child th").text
    assert last_block.endswith("the what-if's prediction"), last_block
    page.find("#unlock").click()
    assert page.find("#whatif-changes").is_displayed()
    page.find('#switches input[data-switch="uniform"]').click()
    page.steps_ready(layer, head, "")
    assert not page.find("#whatif-banner").is_displayed()
    assert page.next_chars() == before
    done.append(
        "'uniform weights' on layer 0, head 1: marked what-if, weights 1/(i+1), the next "
        "characters change; off: the model's own again, exactly"
    )
    page.find('#switches input[data-switch="no_mask"]').click()
    page.steps_ready(layer, head, "no_mask")
    row0 = [exact(title) for _, title in page.step_cells("weights")[0]]
    assert sum(row0[1:]) > 0.01, row0
    page.find('#switches input[data-switch="no_mask"]').click()
    page.steps_ready(layer, head, "")
    done.append("'no causal mask': row 0 attends to the characters after it")
    return done


def lens_cells(page: Page, position: int) -> list[list[tuple[str, float]]]:
    """What each layer would predict at ``position``: (label, probability) by layer."""
    rows = page.driver.execute_script(
        "return [...document.querySelectorAll("
        "  `#lens table[data-position='${arguments[0]}'] tbody tr`)].map("
        "  tr => [...tr.querySelectorAll('td')].map("
        "    td => [td.querySelector('.char').textContent, td.title]))",
        position,
    )
    return [[(label, float(p)) for label, p in row] for row in rows]


def check_network(page: Page, origin: str | None) -> str:
    """Every request the page made went to ``origin`` (e.g. http://127.0.0.1:8000), or
    none was made at all when ``origin`` is None (a file): read from the page's own
    resource timing and from DevTools' network log. Returns the check's line.

    Raises:
        AssertionError: naming each request made elsewhere.
    """
    import json

    timed = page.driver.execute_script(
        "return performance.getEntries().filter(e => e.name.includes(':')).map(e => e.name)"
    )
    logged = []
    for entry in page.driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            logged.append(message["params"]["request"]["url"])
    allowed = ("file:",) if origin is None else (origin.rstrip("/") + "/", "file:")
    elsewhere = sorted({u for u in timed + logged if not u.startswith(allowed)})
    assert not elsewhere, f"the page asked other hosts: {elsewhere}"
    # A request the page's Content-Security-Policy stopped was still an attempt.
    refused = [
        e["message"]
        for e in page.driver.get_log("browser")
        if "Content Security Policy" in e["message"] or "Refused to" in e["message"]
    ]
    assert not refused, f"the page tried to reach elsewhere: {refused}"
    if origin is None:
        assert not [u for u in logged if not u.startswith("file:")]
    asked = len(set(timed + logged))
    if origin is None:
        return f"{asked} addresses asked, all files on disk: no host at all"
    return f"{asked} addresses asked, all on {origin}: nothing else"


def is_hangul(text: str) -> bool:
    """True if ``text`` holds a Hangul syllable (U+AC00..U+D7A3) or jamo."""
    return any("\uac00" <= c <= "\ud7a3" or "\u1100" <= c <= "\u11ff" for c in text)


def check_hangul_drawn(page: Page, css: str) -> str:
    """The Hangul among the elements matching ``css`` is drawn as Hangul, not as boxes:
    with a font that fontconfig says covers Korean, and as wide as a syllable (about
    1 em; a missing glyph's box is about half that). Returns the check's line.

    Raises:
        AssertionError: naming the character, the fonts it was drawn with and its width.
    """
    covering = set(hangul_fonts())
    drawn = [d for d in page.drawn_text(css) if is_hangul(d[0])]
    assert drawn, f"no Hangul in {css}"
    for text, families, width, size in drawn:
        fonts = ", ".join(sorted(covering)) or "none installed (apt-get install fonts-nanum)"
        assert families and set(families) <= covering, (
            f"{text!r} was drawn with {families}, not with a font covering Korean "
            f"({fonts}): the learner sees boxes"
        )
        assert width >= 0.8 * size * len(text), (
            f"{text!r} is {width:.1f} px wide at {size:.0f} px: boxes, not Hangul"
        )
    used = sorted({f for _, families, _, _ in drawn for f in families})
    return f"{len(drawn)} Hangul labels drawn with {', '.join(used)}, each about 1 em wide"


def check_file(page: Page, html: Path, prompt: str) -> list[str]:
    """The --html file opened from disk: the table and the steps of every head are
    there, a derivation works, appending and the switches are off and say why, and
    nothing is asked of any host."""
    page.driver.get_log("performance")  # forget the requests of earlier pages
    page.driver.get(html.resolve().as_uri())
    page.wait_for(lambda d: page.table_rows(), "the file's table")
    assert len(page.table_rows()) == len(prompt)
    assert not page.find("#show").is_enabled()
    assert not page.find("#next-table tbody button").is_enabled()
    assert "--serve" in page.find("#continue-help").text
    done = [f"the --html file opened from disk shows {len(prompt)} rows; append needs --serve"]
    page.steps_ready(page.driver.execute_script("return state.layer"), 0)
    page.find('#heads button[data-value="1"]').click()
    page.steps_ready(page.driver.execute_script("return state.layer"), 1)
    page.find("#steps table[data-step='weights'] td[data-i='1'][data-j='0']").click()
    page.wait_for(lambda d: page.derivation_cell() == ("cell", "1", "0"), "the derivation")
    found = page.derivation()
    assert math.isclose(found["weight"][1], found["model-weight"][1], abs_tol=1e-6)
    switches = page.find_all("#switches input")
    assert switches and not any(s.is_enabled() for s in switches)
    assert "--serve" in page.find("#switches-note").text
    done.append("its steps: every head's from the file, a derivation; the switches need --serve")
    done.append(check_network(page, None))
    return done


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
