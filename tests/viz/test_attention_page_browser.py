"""The attention explorer's page in headless Chromium: it loads, a typed Korean prompt
renders the CLI's table with its Hangul drawn as Hangul (a font covering Korean, each
syllable about 1 em wide: not boxes), clicking a head or a row changes what is shown,
the next-character probabilities follow the temperature, the steps render with the
explorer's numbers, a clicked cell's derivation matches the tables, a what-if switch
changes the next characters and turning it off restores them, the page asks no host but
127.0.0.1, and the --html file works from disk. Skips where selenium or Chromium is not
installed (see tests/viz/browser.py), except under CI=true: .ci/run installs
them, so there a missing browser fails.

    apt-get install chromium chromium-driver fonts-nanum && pip install -r requirements.txt
    python -m pytest -q tests/viz/test_attention_page_browser.py
"""

import runpy
import threading
from pathlib import Path

import explore_attention
from data.tokenizer import CharTokenizer
from tests.viz.conftest import BROWSER_TEST, PROMPT, VOCAB, save_sharp_checkpoint
from tests.viz.page_checks import check_file, check_network, check_page, check_steps
from viz.attention_server import AttentionExplorer, ExplorerServer

ROOT = Path(__file__).resolve().parents[2]
# The screenshot the bench script writes (its checks are page_checks's).
BENCH = runpy.run_path(str(ROOT / "bench" / "attention_page_browser.py"), run_name="bench")
pytestmark = BROWSER_TEST  # a browser: one per worker, conftest's `page`


def test_served_page_in_a_browser(page, tmp_path):
    model = save_sharp_checkpoint(tmp_path / "ckpt.pt")
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), "sharp", ("To be, or not",))
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        done = check_page(page, server.url, explorer, PROMPT)
        steps = check_steps(page, server.url, explorer, PROMPT)
        network = check_network(page, server.url)
    finally:
        server.shutdown()
        server.server_close()
    assert len(done) == 9 and len(steps) == 9
    assert network.endswith(f"all on {server.url}: nothing else")
    shot = tmp_path / "page.png"
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        assert BENCH["screenshot"](page, server.url, PROMPT, shot, head=1, row=4) > 10_000
    finally:
        server.shutdown()
        server.server_close()


def test_html_file_in_a_browser(page, tmp_path, capsys):
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    html = tmp_path / "attention.html"
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--html", str(html)]
    assert explore_attention.main([*argv, "--png", str(tmp_path / "grid.png"), "--dpi", "10"]) == 0
    assert len(check_file(page, html, PROMPT)) == 3
