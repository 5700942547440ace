"""The attention explorer's web page: its server answers with the model's own attention
weights and next-character distribution, bad input gets a message, and the --html file
is self-contained. (The page in a real browser: test_attention_page_browser.py.)"""

import _thread
import json
import math
import re
import signal
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest
import torch

import explore_attention
from data.tokenizer import CharTokenizer
from model import record_attention
from tests.conftest import TIMEOUT_S
from tests.viz.conftest import (
    NUMBER,
    PROMPT,
    VOCAB,
    ids_of,
    parse_table,
    save_sharp_checkpoint,
)
from viz.attention_server import (
    DATA_CLOSE,
    DATA_OPEN,
    PAGE_TEMPLATE,
    AttentionExplorer,
    ExplorerServer,
    next_char_probabilities,
    render_page,
)
from viz.attention_steps import BLOCK_SWITCHES, SWITCHES, attention_steps, record_forward
from viz.attention_table import format_attention_table, format_steps
from viz.attention_weights import prompt_attention, select_head
from viz.messages import Message, say
from viz.page_files import SCRIPT_TAG, page_scripts

ENGLISH = "To be, or not"
# Anything that would fetch or link from the network: a URL scheme, an attribute that
# loads something, a CSS import or url().
EXTERNAL = re.compile(r"(?i)\b(?:https?|ftp|wss?):|\bsrc\s*=|\bhref\s*=|url\(|@import")


@pytest.fixture
def run(tmp_path):
    """A checkpoint of the sharp model, and a server for it on a free port."""
    path = tmp_path / "ckpt.pt"
    model = save_sharp_checkpoint(path)
    server = ExplorerServer(
        ("127.0.0.1", 0), AttentionExplorer(model, CharTokenizer(VOCAB), str(path))
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield model, path, server.url
    server.shutdown()
    server.server_close()


def post(url: str, payload) -> tuple[int, dict]:
    """POST JSON to /api/attention; (HTTP status, decoded JSON answer)."""
    return post_to(url, "api/attention", payload)


def fetch(request) -> tuple[int, dict | str]:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, body, kind = response.status, response.read(), response.headers
    except urllib.error.HTTPError as e:
        status, body, kind = e.code, e.read(), e.headers
    text = body.decode("utf-8")
    return status, json.loads(text) if "json" in kind["Content-Type"] else text


def embedded_data(page: str) -> dict:
    """The JSON block of a rendered page."""
    start = page.index(DATA_OPEN) + len(DATA_OPEN)
    return json.loads(page[start : page.index(DATA_CLOSE, start)])


@pytest.mark.parametrize("prompt", [PROMPT, ENGLISH])
def test_served_weights_are_the_models_and_the_cli_tables(run, prompt, capsys):
    model, path, url = run
    status, answer = post(url, {"prompt": prompt})
    assert status == 200 and answer["notes"] == []
    assert answer["chars"] == list(prompt)
    assert answer["labels"][2] == "␣"  # the CLI's stand-in for the space
    weights = torch.tensor(answer["weights"])
    assert weights.shape == (2, 3, len(prompt), len(prompt))
    with torch.no_grad(), record_attention(model) as own:
        logits, _ = model(ids_of(prompt)[None])
    torch.testing.assert_close(weights, torch.stack([w[0] for w in own]), atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.tensor(answer["logits"]), logits[0, -1], atol=1e-6, rtol=0)
    average = torch.tensor(answer["average"])
    # The CLI itself for its default view (it draws a PNG too: the slow part), then the
    # functions it prints with for other views.
    argv = ["--checkpoint", str(path), "--prompt", prompt, "--device", "cpu", "--decimals", "8"]
    argv += ["--png-layers", "0", "--dpi", "10", "--png", str(path.parent / "grid.png")]
    assert explore_attention.main(argv) == 0
    tables = {(1, None): capsys.readouterr().out}
    cli_weights = prompt_attention(model, ids_of(prompt))
    for layer, head in ((0, 1), (1, 2), (0, None)):
        tables[layer, head] = format_attention_table(
            select_head(cli_weights, layer, head), prompt, decimals=8
        )
    for (layer, head), text in tables.items():
        table = parse_table(text, len(prompt))
        served = average[layer] if head is None else weights[layer, head]
        for i, (*cli_row, total) in enumerate(table):
            np.testing.assert_allclose(served[i, : i + 1], cli_row, atol=1e-6)
            assert total == pytest.approx(1.0, abs=1e-6)
            assert not served[i, i + 1 :].any()  # the future is exactly 0
    assert weights.amax() > 0.99  # sharp: the comparisons above can tell heads apart


def test_next_char_distribution_is_the_softmax_at_that_temperature(run):
    model, _, url = run
    with torch.no_grad():
        logits = model(ids_of(ENGLISH)[None])[0][0, -1].double()
    for temperature in (0.5, 1.0, 2.0):
        status, answer = post(url, {"prompt": ENGLISH, "temperature": temperature})
        assert status == 200 and answer["temperature"] == temperature
        expected = torch.softmax(logits / temperature, dim=-1)
        assert len(answer["next"]) == 10
        top = expected.topk(10)
        assert [n["id"] for n in answer["next"]] == top.indices.tolist()
        np.testing.assert_allclose(
            [n["probability"] for n in answer["next"]], top.values, atol=1e-6
        )
        assert [n["char"] for n in answer["next"]] == [VOCAB[i] for i in top.indices]
        assert expected.max() < 0.99  # not already one-hot: temperature matters here
    status, greedy = post(url, {"prompt": ENGLISH, "temperature": 0})
    assert greedy["next"][0] == {
        "id": int(logits.argmax()),
        "char": VOCAB[int(logits.argmax())],
        "label": VOCAB[int(logits.argmax())].replace(" ", "␣"),
        "probability": 1.0,
    }
    assert {n["probability"] for n in greedy["next"][1:]} == {0.0}
    # Listed by the model's logits at every temperature: at 0 too, not in vocabulary
    # order once the probabilities are 0.
    ranked = torch.sort(logits, descending=True, stable=True).indices[:10].tolist()
    assert [n["id"] for n in greedy["next"]] == ranked
    assert ranked != sorted(ranked)  # vocabulary order would differ
    # Tied logits: the first wins, as argmax and the sampler's greedy path choose.
    tied = next_char_probabilities(torch.tensor([1.0, 3.0, 3.0, 2.0]), 0)
    assert tied.tolist() == [0.0, 1.0, 0.0, 0.0]


def test_bad_prompts_get_the_documented_messages(run):
    _, _, url = run
    assert post(url, {"prompt": ""}) == (
        400,
        {
            "error": "the prompt is empty: type at least one character",
            "message": {"key": "error.empty", "args": {}},  # for the page, in its language
        },
    )
    status, answer = post(url, {"prompt": "새가 x<script>"})
    assert status == 400
    assert "'x' (U+0078) at position 3, '<' (U+003C) at position 4" in answer["error"]
    status, answer = post(url, {"prompt": "To be", "temperature": -1})
    assert status == 400 and "temperature must be a finite number >= 0" in answer["error"]
    status, answer = post(url, {"prompt": 3})
    assert status == 400 and answer["error"] == "the prompt must be text, got int"
    status, answer = post(url, b"not json")
    assert status == 400 and "send JSON" in answer["error"]
    # Longer than block_size (16): the last 16 characters, and a note saying so.
    long = "To be, or not to be"
    status, answer = post(url, {"prompt": long})
    assert status == 200 and answer["prompt"] == long[-16:]
    assert [say(Message(**note)) for note in answer["notes"]] == [
        "The prompt has 19 characters, more than the model's block_size (16): showing its "
        "last 16, the ones the model uses to predict the next character."
    ]
    assert np.shape(answer["weights"]) == (2, 3, 16, 16)


def test_the_server_serves_the_page_and_nothing_from_the_file_system(run):
    _, path, url = run
    status, page = fetch(url)
    # Its only src= are its own scripts, asked of this server (tests/viz/test_page_files.py).
    assert status == 200 and EXTERNAL.search(SCRIPT_TAG.sub("", page)) is None
    data = embedded_data(page)
    assert data["served"] is True and data["result"] is None and data["steps"] is None
    presets = data["model"].pop("presets")
    assert data["model"] == {
        "name": str(path),
        "n_layer": 2,
        "n_head": 3,
        "n_embd": 24,
        "d_k": 8,
        "block_size": 16,
        "position": "learned",
        "norm": "layernorm",
        "qk_norm": False,
        "vocab": VOCAB,
        "vocab_labels": [c.replace(" ", "␣") for c in VOCAB],
        "switches": [{"key": key, "text": text} for key, text in SWITCHES.items()],
        "block_switches": [{"key": k, "text": t} for k, t in BLOCK_SWITCHES.items()],
        "extras": ["words", "projections", "block", "attribution"],
        "encodings": ["json", "float32"],
        "step": None,  # not given: the changes view cannot tell it is its last snapshot
    }
    # The chapters' sentences: the one whose characters the model knows is offered.
    assert [p["text"] for p in presets if not p["missing"]] == [PROMPT]
    status, answer = fetch(url + "api/attention?prompt=" + urllib.request.quote("새가"))
    assert status == 200 and answer["chars"] == ["새", "가"]
    for where in ("ckpt.pt", "viz/attention_page.html", "..%2Fexplore_attention.py", "favicon.ico"):
        status, answer = fetch(url + where)
        assert status == 404 and "nothing at" in answer["error"]
    # A path that climbs out of the root is not resolved either (sent as is, not normalised).
    address = urllib.parse.urlsplit(url)
    with socket.create_connection((address.hostname, address.port)) as connection:
        host = f"Host: {address.netloc}".encode()
        connection.sendall(b"GET /../../etc/passwd HTTP/1.0\r\n" + host + b"\r\n\r\n")
        reply = connection.makefile("rb").read().decode()
    assert reply.startswith("HTTP/1.0 404") and "root:" not in reply


def test_user_text_never_becomes_html():
    # The page inserts text with textContent only: no API that parses a string as HTML.
    template = PAGE_TEMPLATE.read_text(encoding="utf-8")
    script = template + "".join(page_scripts(template).values())
    for parser in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert parser not in script
    # And the embedded JSON cannot close its <script> block early.
    info = {
        "name": "x",
        "n_layer": 1,
        "n_head": 1,
        "block_size": 4,
        "vocab": [],
        "vocab_labels": [],
    }
    nasty = {"prompt": "</script><script>alert(1)</script><!--"}
    page = render_page(info, nasty, served=False)
    assert embedded_data(page) == {"served": False, "model": info, "result": nasty, "steps": None}
    assert page.count("<script>alert") == 0


def test_html_file_embeds_the_prompt_and_no_external_url(tmp_path, capsys):
    path = tmp_path / "ckpt.pt"
    model = save_sharp_checkpoint(path)
    html = tmp_path / "page" / "attention.html"
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--html", str(html)]
    assert explore_attention.main([*argv, "--png", str(tmp_path / "grid.png"), "--dpi", "10"]) == 0
    assert f"wrote {html}: open it in a browser" in capsys.readouterr().out
    page = html.read_text(encoding="utf-8")
    assert EXTERNAL.search(page) is None
    assert '<meta charset="utf-8">' in page and "NanumGothic" in page
    data = embedded_data(page)
    assert data["served"] is False and data["result"]["prompt"] == PROMPT
    with torch.no_grad(), record_attention(model) as own:
        model(ids_of(PROMPT)[None])
    torch.testing.assert_close(
        torch.tensor(data["result"]["weights"]), torch.stack([w[0] for w in own]), atol=1e-6, rtol=0
    )


def test_png_names_the_file_it_writes_and_refuses_what_it_cannot(tmp_path, capsys):
    """--png grid (no suffix) wrote grid.png but said "wrote grid"; --png x.xyz ended in
    matplotlib's traceback. The helper is plot_losses.py's (cli/figure_file.py)."""
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--dpi", "10"]
    assert explore_attention.main([*argv, "--png", str(tmp_path / "grid")]) == 0
    assert f"wrote {tmp_path / 'grid.png'}: " in capsys.readouterr().out
    assert (tmp_path / "grid.png").is_file() and not (tmp_path / "grid").exists()
    assert explore_attention.main([*argv, "--png", str(tmp_path / "x.xyz")]) == 2
    out, err = capsys.readouterr()
    assert "--png: cannot write .xyz files" in err and "Traceback" not in err and out == ""
    assert explore_attention.main([*argv, "--png", str(tmp_path)]) == 2
    assert f"--png {tmp_path} is a folder: give a file name such as" in capsys.readouterr().err


def test_cli_refuses_to_serve_what_it_cannot(tmp_path, capsys):
    def fails(*argv) -> str:
        assert explore_attention.main([*argv, "--device", "cpu"]) == 2
        return capsys.readouterr().err

    assert "no checkpoint at" in fails("--out-dir", str(tmp_path), "--serve")
    (tmp_path / "ckpt.pt").write_bytes(b"not a checkpoint")
    assert "is not a readable checkpoint" in fails("--out-dir", str(tmp_path), "--serve")
    assert "--prompt is required" in fails("--out-dir", str(tmp_path))
    assert "--port must be in 0..65535" in fails("--serve", "--port", "70000")
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    assert "'x' (U+0078)" in fails(
        "--checkpoint", str(path), "--serve", "--prompt", "x", "--port", "0"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert f"cannot listen on 127.0.0.1:{port}" in fails(
            "--checkpoint", str(path), "--serve", "--port", port
        )


def test_serve_prints_its_address_and_stops_cleanly_on_ctrl_c(tmp_path, capsys, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_sharp_checkpoint(path)
    with socket.socket() as probe:  # a port free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pages = []
    # Browse once the server serves, however long loading the model took: no polling
    # against the clock (a busy machine could outlast any number of tries).
    serving = threading.Event()
    serve_forever = ExplorerServer.serve_forever

    def announced_serve_forever(self, *args, **kwargs):
        serving.set()
        return serve_forever(self, *args, **kwargs)

    monkeypatch.setattr(ExplorerServer, "serve_forever", announced_serve_forever)

    def browse_then_press_ctrl_c():
        try:
            if serving.wait(timeout=TIMEOUT_S):  # the timeout only keeps a hang from stalling CI
                pages.append(fetch(f"http://127.0.0.1:{port}/")[0])
        except Exception as e:  # shown by the assert below, not lost with this thread
            pages.append(e)
        finally:
            # Even when the fetch failed: otherwise the server would serve for ever.
            _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=browse_then_press_ctrl_c, daemon=True).start()
        argv = ["--checkpoint", str(path), "--serve", "--port", str(port), "--device", "cpu"]
        assert explore_attention.main(argv) == 0
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped main(): the user would see a traceback")
    finally:
        signal.signal(signal.SIGINT, previous)
    out = capsys.readouterr()
    assert pages == [200]
    assert f"at http://127.0.0.1:{port}/" in out.out and out.out.endswith("stopped\n")
    assert out.err == ""


def test_steps_endpoint_answers_one_head_and_takes_switches(run):
    model, _, url = run
    status, steps = post_to(url, "api/steps", {"prompt": PROMPT, "layer": 0, "head": 1})
    assert status == 200 and steps["layer"] == 0 and list(steps["heads"]) == ["1"]
    record = record_forward(model, ids_of(PROMPT))
    own = {s.key: s.values for s in attention_steps(record, 0, 1)}
    for key, step in {**steps["layer_steps"], **steps["heads"]["1"]}.items():
        values = torch.tensor(
            [[-math.inf if v is None else v for v in row] for row in step["values"]]
        )
        assert torch.equal(values, own[key]), key  # float32 through JSON, exactly
    assert steps["what_if"] is None and steps["prompt"] == PROMPT
    query = "api/steps?prompt=" + urllib.request.quote(PROMPT) + "&layer=1&head=2"
    status, switched = fetch(url + query + "&switches=no_mask,uniform")
    assert status == 200 and switched["what_if"]["switches"] == ["no_mask", "uniform"]
    T = len(PROMPT)
    assert switched["heads"]["2"]["weights"]["values"][0] == pytest.approx([1 / T] * T)
    status, answer = post(url, {"prompt": PROMPT, "layer": 1, "head": 2, "switches": ["uniform"]})
    assert status == 200 and answer["what_if"]["layer"] == 1 and answer["model"] is not None
    for body, message in (
        ({"prompt": PROMPT, "layer": 0, "head": 3}, "head must be a whole number in 0..2"),
        ({"prompt": PROMPT, "layer": "x", "head": 0}, "layer must be a whole number in 0..1"),
        ({"prompt": PROMPT, "switches": ["no_softmax"]}, "unknown switch 'no_softmax'"),
        ({"prompt": PROMPT, "switches": "no_mask"}, None),  # a query-style string is read
        ({"prompt": "", "layer": 0, "head": 0}, "the prompt is empty"),
    ):
        status, answer = post_to(url, "api/steps", body)
        if message is None:
            assert status == 200 and answer["what_if"]["switches"] == ["no_mask"]
        else:
            assert status == 400 and message in answer["error"], answer


def post_to(url: str, path: str, payload) -> tuple[int, dict]:
    """POST JSON (or raw bytes, labelled JSON) to ``path``, as the page does."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url + path, data=data, method="POST", headers=headers)
    return fetch(request)


def test_html_file_embeds_every_heads_steps(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = save_sharp_checkpoint(path)
    html = tmp_path / "attention.html"
    argv = ["--checkpoint", str(path), "--prompt", "To be", "--device", "cpu", "--html", str(html)]
    assert explore_attention.main([*argv, "--png", str(tmp_path / "grid.png"), "--dpi", "10"]) == 0
    page = html.read_text(encoding="utf-8")
    assert EXTERNAL.search(page) is None
    data = embedded_data(page)
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), str(path))
    assert data["steps"] == explorer.all_steps("To be")
    assert [len(layer["heads"]) for layer in data["steps"]] == [3, 3]
    assert data["result"]["lens"] == explorer.explain("To be")["lens"]


def test_cli_steps_prints_the_pages_numbers(checkpoint, capsys):
    model, path = checkpoint
    argv = ["--checkpoint", str(path), "--prompt", PROMPT, "--device", "cpu", "--steps"]
    assert explore_attention.main([*argv, "--layer", "0", "--head", "1", "--decimals", "4"]) == 0
    out = capsys.readouterr().out
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), str(path))
    page = explorer.steps(PROMPT, 0, 1)
    steps = attention_steps(explorer.forward(ids_of(PROMPT)), 0, 1)
    assert format_steps(steps, PROMPT, 4, 16) in out  # the function --steps prints with
    # The weights as the page has them, row by row, at 4 decimals.
    section = out[out.index("Step 7 · softmax") :]
    rows = [line for line in section.splitlines()[4:] if re.match(r"^\s*\d+ \S", line)]
    T = len(PROMPT)
    for i, line in enumerate(rows[:T]):
        printed = NUMBER.findall(line.split(maxsplit=2)[2])
        assert printed == [f"{v:.4f}" for v in page["heads"]["1"]["weights"]["values"][i]]
    masked = out[out.index("Step 6 · the causal mask") :].splitlines()[4]
    assert masked.count("−∞") == T - 1  # row 0: every later character
    assert "layer 0 of 0..1, head 1 of 0..2" in out and "WHAT-IF" not in out
    assert "… 8 more columns (24 in all)" in out  # X is 24 wide; 16 shown
    lens = explorer.explain(PROMPT)["lens"]
    best = VOCAB[lens["ids"][-1][-1][0]].replace(" ", "␣")
    assert re.search(rf"after block 1: {re.escape(best)} \d\.\d{{4}}", out)
    assert explore_attention.main([*argv, "--switches", "no_mask", "--layer", "0"]) == 0
    assert "WHAT-IF, not what the model computes: layer 0, head 0: no causal mask" in (
        capsys.readouterr().out
    )


def test_cli_steps_refuses_what_it_cannot(checkpoint, capsys):
    _, path = checkpoint
    argv = ["--checkpoint", str(path), "--prompt", "To be", "--device", "cpu"]

    def fails(*extra) -> str:
        assert explore_attention.main([*argv, *extra]) == 2
        return capsys.readouterr().err

    assert "add --steps" in fails("--switches", "no_mask")
    assert "unknown switch 'no_softmax'" in fails("--steps", "--switches", "no_softmax")
    assert "head must be in 0..2" in fails("--steps", "--head", "3")
    assert "--steps prints the steps" in fails("--steps", "--serve")
    assert "--columns must be >= 0" in fails("--steps", "--columns", "-1")
