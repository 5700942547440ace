"""The block view at 1280x800 in Korean, in headless Chromium (viz/page/block.js,
viz/page/steps.js): each block switch on one line, and each heatmap with its colour
scale (the values at either end) and what its columns are. Skips where selenium or
Chromium is not installed, as tests/viz/test_attention_page_browser.py."""

import os
import runpy
import threading
from pathlib import Path

import pytest

from data.tokenizer import CharTokenizer
from tests.viz.conftest import PROMPT, VOCAB, sharp_model
from viz.attention_server import AttentionExplorer, ExplorerServer

ROOT = Path(__file__).resolve().parents[2]
BENCH = runpy.run_path(str(ROOT / "bench" / "attention_page_browser.py"), run_name="bench")
MISSING = BENCH["browser_missing"]()
IN_CI = os.environ.get("CI", "").lower() == "true"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None and not IN_CI, reason=MISSING or ""),
]

# The tops of each line box of a label's text: one distinct top = one line.
LABEL_LINES = """
return [...document.querySelectorAll('#block-switches label')].map(label => {
  const tops = new Set();
  for (const node of label.childNodes) {
    if (node.nodeType !== Node.TEXT_NODE || !node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) tops.add(Math.round(rect.top / 4));
  }
  return [label.textContent.trim(), tops.size];
});
"""
LEGENDS = """
return [...document.querySelectorAll('#block canvas')].map(canvas => {
  const legend = canvas.parentElement.querySelector('.heatmap-legend');
  return [canvas.dataset.step, legend && legend.textContent,
          legend && legend.querySelector('.legend-bar').getBoundingClientRect().width];
});
"""

# What the next-character table and the pushes say about the position they are for.
NOTES = """
const next = document.getElementById('next-position');
const pushes = document.getElementById('attribution-position');
return [next.hidden ? '' : next.textContent, pushes ? pushes.textContent : ''];
"""


def test_block_switches_fit_one_line_and_heatmaps_have_legends_in_korean():
    if MISSING is not None:
        pytest.fail(f"CI=true and {MISSING}; .ci/run installs it")
    explorer = AttentionExplorer(sharp_model(), CharTokenizer(VOCAB), "sharp")
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    driver = BENCH["open_browser"](1280, 800)
    page = BENCH["Page"](driver)
    try:
        page.open(server.url + "?lang=ko")
        page.show(PROMPT)
        page.steps_ready(1, 0)
        page.wait_for(lambda d: page.find_all("#block .step canvas"), "the block's heatmaps")
        lines = driver.execute_script(LABEL_LINES)
        legends = driver.execute_script(LEGENDS)
        last_picked = driver.execute_script(NOTES)
        driver.execute_script(
            "document.querySelector('#attention-table tr[data-row=\"1\"]').click()"
        )
        page.wait_for(lambda d: driver.execute_script(NOTES)[0], "the next table's note")
        row_picked = driver.execute_script(NOTES)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    assert [text.split(":")[0] for text, _ in lines] == [
        "이 헤드의 출력을 0으로",
        "이 층의 MLP 출력을 0으로",
        "MLP 뉴런 하나의 활성화를 0으로",
    ]
    assert [n for _, n in lines] == [1, 1, 1], lines
    # The MLP's up-projection and activation are 4 * n_embd = 96 channels wide.
    by_step = {step: (text, width) for step, text, width in legends}
    assert {"up", "act"} <= set(by_step)
    for step, (text, width) in by_step.items():
        assert text is not None, f"{step}: no legend"
        assert width > 50, step
        assert "색: 0보다 작으면 파랑, 크면 빨강" in text, text
        assert "열: 0번부터" in text, text
    assert "열: 0번부터 95번까지의 채널(위쪽 숫자)" in by_step["up"][0]
    # The last row picked: nothing to say. Another row: both say they are for the last.
    last = len(PROMPT) - 1
    assert last_picked == ["", ""]
    assert row_picked[0].startswith(f"이 표는 마지막 글자 '{PROMPT[-1]}'(위치 {last})의 다음 글자")
    assert f"고른 행 '{PROMPT[1]}'(위치 1)에서의 예측" in row_picked[0]
    assert row_picked[1] == (
        f"이 값들은 마지막 글자 '{PROMPT[-1]}'(위치 {last})에서 예측한 다음 글자에 대한 것입니다. "
        f"고른 행 '{PROMPT[1]}'(위치 1)에 대한 것이 아닙니다."
    )
