"""The attention explorer's page driven in headless Chromium (selenium): starting the
browser (`open_browser`, or why it cannot start: `browser_missing`) and `Page`, what a
learner does on the page and reads from it. The browser tests in tests/viz/ and the
scripts bench/attention_page_browser.py and bench/attention_page_speed.py drive the
page through it; the assertions about the page are in tests/viz/page_checks.py.

Needs Chromium, its driver and selenium; on Debian or Ubuntu:

    apt-get install -y chromium chromium-driver fonts-nanum    # fonts-nanum: Hangul
    pip install selenium
"""

import shutil
import subprocess

WAIT_SECONDS = 20


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
