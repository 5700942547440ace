"""The attention page in headless Chromium, in Korean and in English (one browser
session for all): every caption and the glossary in the language asked for, the switch
between them, the layer-0 note on X, a what-if switch that changes a mid-sentence row's
prediction and retitles its captions (no −∞, the future not greyed), the derivation of
a cell readable without scrolling at 1280 × 800, and a long prompt keeping its row and
column labels in view. Skips where the browser is missing, as
tests/viz/test_attention_page_browser.py does (not under CI=true).

    python -m pytest -q tests/viz/test_attention_page_languages_browser.py
"""

import os
import threading
from pathlib import Path

import pytest

import explore_attention
from data.tokenizer import CharTokenizer
from tests.conftest import sharp_model
from tests.viz.browser import Page
from tests.viz.conftest import BROWSER_TEST, PROMPT, VOCAB, save_sharp_checkpoint
from viz.attention_server import AttentionExplorer, ExplorerServer
from viz.messages import CATALOGUE, LINK

pytestmark = BROWSER_TEST
LANGS = ["ko", "en"]
LONG = (PROMPT + " ") * 6  # 60 characters: wider and taller than a screen of cells


def words(key: str, lang: str, **args) -> str:
    """A catalogue message as the page shows it: placeholders filled, links' words."""
    text = LINK.sub(r"\2", CATALOGUE[key][lang])
    for name, value in args.items():
        text = text.replace("{" + name + "}", str(value))
    return text


@pytest.fixture(scope="module")
def explorer():
    # The Korean sample model's shape (4 heads of d_k 32), on the tests' vocabulary.
    model = sharp_model(len(VOCAB), 64, std=0.1, n_layer=2, n_head=4, n_embd=128)
    return AttentionExplorer(model, CharTokenizer(VOCAB), "wide")


@pytest.fixture(scope="module")
def url(explorer):
    server = ExplorerServer(("127.0.0.1", 0), explorer, PROMPT)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(browser):
    # The page itself 1280 × 800, as on a laptop's screen; the shared browser's own
    # size again after this module.
    metrics = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    yield Page(browser)
    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def js(page, script: str, *args):
    return page.driver.execute_script(script, *args)


def text_of(page, css: str) -> str:
    return js(page, "return document.querySelector(arguments[0]).textContent", css)


def open_head(page, url: str, lang: str, layer: int, head: int) -> None:
    page.open(f"{url}?lang={lang}")
    page.wait_for(
        lambda d: js(page, "return document.querySelectorAll('#attention-table tr').length"),
        "the first prompt's table",
    )
    js(
        page,
        "document.querySelector(`#layers button[data-value='${arguments[0]}']`).click()",
        layer,
    )
    js(page, "document.querySelector(`#heads button[data-value='${arguments[0]}']`).click()", head)
    page.steps_ready(layer, head)


@pytest.mark.parametrize("lang", LANGS)
def test_captions_and_glossary_in_the_language_asked_for(page, url, explorer, lang):
    open_head(page, url, lang, 0, 1)
    assert js(page, "return document.documentElement.lang") == lang
    assert text_of(page, "h1") == words("page.title", lang)
    assert text_of(page, "#table-help") == words("table.help", lang)
    assert text_of(page, "#steps-title") == words("steps.title", lang, layer=0, head=1)
    headings = js(
        page, "return [...document.querySelectorAll('#steps h3')].map(h => h.textContent)"
    )
    assert headings[5] == words("step.heading", lang, chapter=6, name=words("chapter.6", lang))
    assert len(headings) == 9
    # Layer 0: X is the chapters' X, the embeddings plus learned positions after the norm.
    assert text_of(page, "#layer0-note") == words("step.x.layer0_learned", lang, norm="LayerNorm")
    # The glossary: every term, and the first caption's link leads to its entry.
    terms = js(
        page, "return [...document.querySelectorAll('#glossary dt')].map(d => d.textContent)"
    )
    assert (
        terms[0] == words("glossary.residual.name", lang) and len(terms) == 15
    )  # nats: the unit of the losses
    link = js(
        page,
        "return document.querySelector('#steps .step[data-step=x] h4 a.term[data-term=residual]')",
    )
    assert link.get_attribute("data-term") == "residual"
    assert link.text == {"ko": "잔차 스트림", "en": "residual stream"}[lang]
    link.click()
    assert js(page, "return location.hash") == "#glossary-residual"
    assert (
        js(page, "return document.getElementById('glossary-residual').getBoundingClientRect().top")
        < 50
    )
    if lang == "ko":  # the chapters' words
        body = js(page, "return document.body.innerText")
        for term in ("인과 마스크", "가중합", "쿼리", "밸류", "어텐션 점수", "잔차 스트림"):
            assert term in body, term
        assert "Self-attention step by step" not in body and "Where one number" not in body


def test_the_visible_switch_changes_the_language_in_place(page, url):
    open_head(page, url, "ko", 1, 0)
    requests = js(page, "return performance.getEntriesByType('resource').length")
    js(page, "document.querySelector('#languages button[data-lang=en]').click()")
    assert text_of(page, "h1") == "Attention explorer"
    assert text_of(page, "#derivation h3") == words("derivation.title", "en")
    assert js(page, "return location.search") == "?lang=en"
    # Redrawn from what the page holds: nothing asked of the server.
    assert js(page, "return performance.getEntriesByType('resource').length") == requests
    js(page, "document.querySelector('#languages button[data-lang=ko]').click()")
    assert text_of(page, "h1") == "어텐션 탐색기"


def switched_head(explorer) -> tuple[int, list[int]]:
    """A head of layer 0 whose no-mask switch changes an earlier row's prediction."""
    for head in range(4):
        answer = explorer.explain(PROMPT, 1.0, explorer.what_if(0, head, ["no_mask"]))
        rows = [c["position"] for c in answer["model"]["changed"]]
        if any(p < len(PROMPT) - 1 for p in rows):
            return head, rows
    raise AssertionError("no head of layer 0 changes a row's prediction without the mask")


@pytest.mark.parametrize("lang", LANGS)
def test_a_switch_changes_a_mid_sentence_row_and_says_what_it_changed(page, url, explorer, lang):
    head, rows = switched_head(explorer)
    open_head(page, url, lang, 0, head)
    js(page, "document.querySelector('#switches input[data-switch=no_mask]').click()")
    page.steps_ready(0, head, "no_mask")
    body = js(page, "return document.body.innerText")
    assert "−∞" not in body  # nothing is masked, and no caption says otherwise
    assert text_of(page, "#steps .step[data-step=masked] h4") == words(
        "step.masked.no_mask.title", lang
    )
    assert text_of(page, "#steps .step[data-step=weights] h4") == words(
        "step.weights.no_mask.title", lang
    )
    assert text_of(page, "#table-help") == words("table.help_no_mask", lang)
    # The future's weights are real, and drawn as such: no cell is greyed.
    assert (
        js(
            page,
            "return document.querySelectorAll('#steps table[data-step=weights] td.future').length",
        )
        == 0
    )
    assert js(page, "return document.querySelectorAll('#attention-table td.future').length") == 0
    # The page points to the rows whose prediction changes; a click shows one in the lens.
    offered = js(
        page,
        "return [...document.querySelectorAll('#changed-rows button')]"
        ".map(b => Number(b.dataset.row))",
    )
    assert offered == rows
    middle = next(p for p in rows if p < len(PROMPT) - 1)
    js(
        page,
        "document.querySelector(`#changed-rows button[data-row='${arguments[0]}']`).click()",
        middle,
    )
    assert js(
        page,
        "return document.querySelector(`#lens table[data-position='${arguments[0]}']`) !== null",
        middle,
    )
    own = explorer.explain(PROMPT)["lens"]["ids"][-1][middle][0]
    shown = js(
        page,
        "const t = document.querySelector(`#lens table[data-position='${arguments[0]}']`);"
        "return Number(t.querySelector('tbody tr:last-child td').dataset.id)",
        middle,
    )
    assert shown != own  # the what-if's prediction at that row, not the model's
    # and the model's own beside it, in words.
    note = js(
        page,
        "return document.querySelector("
        "`#lens [data-role=own-prediction][data-position='${arguments[0]}']`).textContent",
        middle,
    )
    chars = explorer.model_info()["vocab_labels"]
    assert note == words("lens.own_changed", lang, own=chars[own], whatif=chars[shown])
    js(page, "document.querySelector('#switches input[data-switch=no_mask]').click()")
    page.steps_ready(0, head)
    assert "−∞" in js(page, "return document.body.innerText")


@pytest.mark.parametrize("lang", LANGS)
def test_a_derivation_reads_without_scrolling_at_1280_by_800(page, url, lang):
    open_head(page, url, lang, 1, 0)
    assert js(page, "return [innerWidth, innerHeight]") == [1280, 800]
    cell = "#steps table[data-step=weights] td[data-i='7'][data-j='3']"
    js(page, "document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", cell)
    js(page, "document.querySelector(arguments[0]).click()", cell)
    js(page, "document.getElementById('derivation').scrollIntoView({block: 'start'})")
    side = js(
        page, "const s = document.getElementById('side'); return [s.scrollHeight, s.clientHeight]"
    )
    assert side[0] <= side[1] + 1, f"the panel scrolls inside itself: {side}"
    box = js(
        page,
        "const r = document.getElementById('derivation').getBoundingClientRect();"
        "return [r.top, r.bottom]",
    )
    assert box[0] >= 0 and box[1] <= 800, box
    # Every part of it: the products, ÷√d_k, the mask, the softmax and the weight.
    roles = js(
        page,
        "return [...document.querySelectorAll('#derivation [data-role]')].map(r => r.dataset.role)",
    )
    for role in ("products", "sum", "scaled", "mask", "softmax", "total", "weight", "model-weight"):
        assert role in roles, role
    # No cell drawn over its neighbour: a sticky label once covered the softmax's "−0.8221".
    overlaps = js(
        page,
        """
        const out = [];
        for (const tr of document.querySelectorAll('#derivation table tr')) {
          const cells = [...tr.children];
          for (let k = 1; k < cells.length; k++) {
            const a = cells[k - 1].getBoundingClientRect(), b = cells[k].getBoundingClientRect();
            if (a.right > b.left + 1) out.push([cells[k - 1].textContent, cells[k].textContent]);
          }
        }
        return out;
    """,
    )
    assert overlaps == [], overlaps
    if folder := os.environ.get("PAGE_SCREENSHOTS"):  # a folder for pictures of the page
        page.driver.save_screenshot(str(Path(folder) / f"derivation_{lang}.png"))


def test_an_x_x_cell_keeps_its_softmax_at_the_panels_width(page, url):
    """X·Xᵀ's x_i has all 128 channels: its products beside the softmax squeezed the
    softmax table into a strip of 76 px, its exp column out of sight."""
    open_head(page, url, "ko", 1, 0)
    cell = "#steps table[data-step=xx] td[data-i='7'][data-j='3']"
    js(page, "document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", cell)
    js(page, "document.querySelector(arguments[0]).click()", cell)
    frame = js(
        page,
        "const t = document.querySelector('#derivation table[data-role=softmax]');"
        "return [t.parentElement.scrollWidth, t.parentElement.clientWidth]",
    )
    assert frame[0] <= frame[1] + 1, f"the softmax scrolls inside its frame: {frame}"


def test_a_weighted_sum_keeps_its_headers_on_one_line_and_its_scrollbar_in_view(page, url):
    """weights·V's row: a column a character, wider than the panel. A Korean newcomer
    found its headers wrapped letter by letter and its sideways scrollbar 32 rows down."""
    open_head(page, url, "ko", 1, 0)
    page.heatmap_event("out", 7, 0, "click")  # d_k = 32 columns: a heatmap
    page.wait_for(lambda d: page.derivation_cell()[:2] == ("row", "7"), "the row's sum")
    js(page, "document.getElementById('derivation').scrollIntoView({block: 'start'})")
    heights, frame = js(
        page,
        """
        const table = document.querySelector('#derivation table[data-role=weighted-sum]');
        const line = parseFloat(getComputedStyle(table.querySelector('th')).lineHeight);
        const tall = [...table.querySelectorAll('th')].filter(
          th => th.textContent && th.getBoundingClientRect().height > 1.5 * line);
        const f = table.parentElement.getBoundingClientRect();
        return [tall.map(th => th.textContent), [f.bottom, innerHeight]];
    """,
    )
    assert heights == [], f"headers on several lines: {heights}"
    assert frame[0] <= frame[1], f"the frame's scrollbar is below the screen: {frame}"


def test_a_long_prompt_keeps_its_labels_in_view(page, url):
    open_head(page, url, "ko", 1, 0)
    page.show(LONG[:64])
    frame = "#attention-table"
    js(
        page,
        "const f = document.querySelector(arguments[0]).parentElement;"
        "f.scrollLeft = 1e6; f.scrollTop = 1e6;",
        frame,
    )
    inside = js(
        page,
        """
        const f = document.querySelector(arguments[0]).parentElement.getBoundingClientRect();
        const rows = [...document.querySelectorAll(arguments[0] + ' tbody tr')];
        const last = rows[rows.length - 1].querySelector('th.char').getBoundingClientRect();
        const column = [...document.querySelectorAll(arguments[0] + ' thead th.char')].pop()
          .getBoundingClientRect();
        return [last.left >= f.left - 1 && last.right <= f.right,
                column.top >= f.top - 1 && column.bottom <= f.bottom,
                f.height <= innerHeight];
    """,
        frame,
    )
    assert inside == [True, True, True], inside


def test_a_korean_html_file_opens_in_korean_and_switches_to_english(page, tmp_path):
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    html = tmp_path / "attention.html"
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--html", str(html)]
    png = ["--png", str(tmp_path / "grid.png"), "--dpi", "10"]
    assert explore_attention.main([*argv, *png, "--lang", "ko"]) == 0
    page.driver.get(html.as_uri())
    page.wait_for(
        lambda d: js(page, "return document.getElementById('steps').dataset.ready"),
        "the file's steps",
    )
    assert text_of(page, "h1") == "어텐션 탐색기"
    assert text_of(page, "#steps h3").startswith("1단계 · ")
    assert text_of(page, "#switches-note") == words("switches.file", "ko")
    js(page, "document.querySelector('#languages button[data-lang=en]').click()")
    assert text_of(page, "#steps h3").startswith("Step 1 · ")
