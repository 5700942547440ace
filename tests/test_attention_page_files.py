"""The attention page's scripts live in viz/page/*.js: the server answers each one the
page names (and nothing else of viz/page/), a --html file carries them inline with a
policy that allows exactly their text, and no script reaches for the network."""

import base64
import hashlib
import re
import threading
import urllib.request

import pytest
from test_attention_explorer import VOCAB, save_sharp_checkpoint
from test_attention_page import EXTERNAL, embedded_data, fetch

from data.tokenizer import CharTokenizer
from viz.attention_server import AttentionExplorer, ExplorerServer, render_page
from viz.page_files import PAGE_TEMPLATE, SCRIPT_DIR, inline_scripts, page_scripts, script_names

TEMPLATE = PAGE_TEMPLATE.read_text(encoding="utf-8")
INFO = {"name": "x", "n_layer": 1, "n_head": 1, "block_size": 4, "vocab": [], "vocab_labels": []}


def test_the_page_names_every_script_of_its_folder_once():
    names = script_names(TEMPLATE)
    assert sorted(names) == sorted(p.name for p in SCRIPT_DIR.glob("*.js"))
    assert len(set(names)) == len(names) and names[0] == "core.js" and names[-1] == "main.js"
    for name, text in page_scripts(TEMPLATE).items():
        assert EXTERNAL.search(text) is None, name
        assert text.lstrip().startswith("//") and '"use strict";' in text, name


def test_the_server_answers_each_script_and_nothing_else(tmp_path):
    model = save_sharp_checkpoint(tmp_path / "ckpt.pt")
    server = ExplorerServer(("127.0.0.1", 0), AttentionExplorer(model, CharTokenizer(VOCAB), "x"))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        status, page = fetch(server.url)
        assert status == 200 and "script-src 'self'" in page
        for name, text in page_scripts(TEMPLATE).items():
            assert f'<script src="page/{name}"></script>' in page
            with urllib.request.urlopen(server.url + f"page/{name}", timeout=10) as response:
                assert response.headers["Content-Type"] == "text/javascript; charset=utf-8"
                assert response.read().decode("utf-8") == text
        for where in ("page/nothing.js", "page/../attention_steps.py", "viz/page/core.js"):
            status, answer = fetch(server.url + where)
            assert status == 404 and "nothing at" in answer["error"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_carries_its_scripts_inline_and_allows_only_them():
    page = render_page(INFO, None, served=False)
    assert "<script src=" not in page and EXTERNAL.search(page) is None
    scripts = page_scripts(TEMPLATE)
    for text in scripts.values():
        assert f"<script>\n{text}</script>" in page
    policy = re.search(r"script-src ([^;]*);", page).group(1).split()
    digests = [hashlib.sha256(f"\n{text}".encode()).digest() for text in scripts.values()]
    assert policy == [f"'sha256-{base64.b64encode(d).decode()}'" for d in digests]
    assert embedded_data(page)["served"] is False


def test_a_script_that_would_end_its_tag_is_refused():
    with pytest.raises(ValueError, match="holds '</script'"):
        inline_scripts(TEMPLATE, {"core.js": "const a = '</SCRIPT>';"})
