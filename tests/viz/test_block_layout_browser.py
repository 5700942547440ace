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
