"""Two models on the page (POST /api/compare, `AttentionExplorer.compare`,
explore_attention.py --compare --serve): every number is each model's own forward
pass, a prompt with a character one model lacks is said rather than failing, and the
endpoint keeps the same Host, Origin and JSON checks as the others."""

import http.client
import json
import threading

import pytest
import torch

import explore_attention
from data.tokenizer import CharTokenizer
from model import GPT, GPTConfig
from tests.viz.conftest import PROMPT, VOCAB, ids_of, save_sharp_checkpoint
from viz.array_encoding import unpacked
from viz.attention_server import (
    DATA_CLOSE,
    DATA_OPEN,
    TOP_K,
    AttentionExplorer,
    ExplorerServer,
    render_page,
)
from viz.attention_weights import attention_and_next_logits
from viz.model_compare import ComparedModel

OTHER_VOCAB = [c for c in VOCAB if c != "T"]  # B never saw "T"


def other_model() -> GPT:
    """B: the sharp model's shape, other weights, a vocabulary without "T"."""
    torch.manual_seed(7)
    config = GPTConfig(vocab_size=len(OTHER_VOCAB), block_size=16, n_layer=2, n_head=3, n_embd=24)
    model = GPT(config)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.qkv_proj.weight.normal_(0.0, 1.0)
    return model.eval()


def page_data(page: str) -> dict:
    """The page's embedded JSON data block."""
    return json.loads(page.partition(DATA_OPEN)[2].partition(DATA_CLOSE)[0])


def serve(explorer, compare=None):
    server = ExplorerServer(("127.0.0.1", 0), explorer, compare=compare)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "ckpt.pt"
    a = save_sharp_checkpoint(path)
    b = other_model()
    explorer = AttentionExplorer(a, CharTokenizer(VOCAB), str(path))
    server = serve(explorer, ComparedModel("parent", b, CharTokenizer(OTHER_VOCAB)))
    yield a, b, server.server_address[1]
    server.shutdown()
    server.server_close()


def post(port, body, path="/api/compare", headers=None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    host = f"127.0.0.1:{port}"
    headers = headers or {"Content-Type": "application/json", "Origin": f"http://{host}"}
    try:
        data = json.dumps(body).encode()
        connection.request("POST", path, data, {"Host": host, **headers})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def layer_top1(model: GPT, ids: torch.Tensor) -> list[tuple[int, float]]:
    """Reference logit lens at the last position: the final norm and LM head of each
    block's output, caught by forward hooks (not viz.logit_lens)."""
    outputs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outputs.append(o)) for b in model.blocks]
    try:
        with torch.no_grad():
            model(ids[None])
    finally:
        for hook in hooks:
            hook.remove()
    tops = []
    with torch.no_grad():
        for out in outputs:
            probs = torch.softmax(model.head(out)[0, -1].double(), dim=-1)
            tops.append((int(probs.argmax()), float(probs.max())))
    return tops


def test_the_compare_answer_is_each_models_own_forward_pass(served):
    a, b, port = served
    status, answer = post(port, {"prompt": PROMPT})
    assert status == 200, answer
    tops = {}
    for side, (model, vocab) in enumerate(((a, VOCAB), (b, OTHER_VOCAB))):
        entry = answer["models"][side]
        assert entry["prompt"] == PROMPT and entry["missing"] == []
        ids = torch.tensor([vocab.index(c) for c in PROMPT])
        weights, logits = attention_and_next_logits(model, ids)
        torch.testing.assert_close(torch.tensor(entry["weights"]), weights, rtol=0, atol=1e-6)
        probs = torch.softmax(logits.double(), dim=-1)
        top = torch.sort(probs, descending=True, stable=True)
        assert [c for c, _ in entry["next"]] == [vocab[i] for i in top.indices[:TOP_K]]
        assert [p for _, p in entry["next"]] == pytest.approx(top.values[:TOP_K].tolist(), abs=1e-9)
        expected_layers = [(vocab[i], p) for i, p in layer_top1(model, ids)]
        assert [c for c, _ in entry["layers"]] == [c for c, _ in expected_layers]
        assert [p for _, p in entry["layers"]] == pytest.approx(
            [p for _, p in expected_layers], abs=1e-6
        )
        tops[side] = {vocab[i]: float(p) for i, p in enumerate(probs)}
    # The differences, from the two passes.
    for char, pa, pb, changed in answer["next"]:
        assert pa == pytest.approx(tops[0][char], abs=1e-9)
        if char in OTHER_VOCAB:
            assert pb == pytest.approx(tops[1][char], abs=1e-9)
        else:  # B has no such character: no probability, not 0
            assert pb is None
        assert changed == (abs(pa - (pb or 0.0)) >= 0.05)
    assert any(changed for *_, changed in answer["next"])  # the two models do differ
    wa, wb = (
        torch.tensor(answer["models"][0]["weights"]),
        torch.tensor(answer["models"][1]["weights"]),
    )
    T = len(PROMPT)
    heads = (wa - wb).abs().sum((-1, -2)) / (T * (T + 1) / 2)
    torch.testing.assert_close(torch.tensor(answer["heads"]), heads, rtol=0, atol=1e-6)
    assert answer["labels"][" "] == "␣" and answer["labels"]["새"] == "새"
    # Packed as float32 bytes, as the page asks: the same weights.
    status, packed = post(port, {"prompt": PROMPT, "encoding": "float32"})
    assert status == 200
    torch.testing.assert_close(unpacked(packed["models"][1]["weights"]), wb, rtol=0, atol=0)


def test_a_character_one_model_lacks_is_said_not_an_error(served):
    a, _, port = served
    status, answer = post(port, {"prompt": "To be"})
    assert status == 200
    mine, parent = answer["models"]
    assert parent == {"label": "parent", "prompt": "To be", "missing": ["T"]}
    assert mine["missing"] == [] and len(mine["next"]) == TOP_K
    weights, _ = attention_and_next_logits(a, ids_of("To be"))
    torch.testing.assert_close(torch.tensor(mine["weights"]), weights, rtol=0, atol=1e-6)
    assert answer["next"] is None and answer["heads"] is None and answer["distance"] is None


def test_the_compare_endpoint_refuses_what_the_others_refuse(served, tmp_path):
    _, _, port = served
    status, answer = post(port, {"prompt": ""})
    assert status == 400 and answer["message"]["key"] == "error.empty"
    status, answer = post(port, {"prompt": ["x"]})
    assert status == 400 and answer["message"]["key"] == "error.not_text"
    status, answer = post(port, {"prompt": "To", "encoding": "png"})
    assert status == 400 and "encoding" in answer["error"]
    other_origin = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    assert post(port, {"prompt": "To"}, headers=other_origin)[0] == 403
    assert post(port, {"prompt": "To"}, headers={"Content-Type": "text/plain"})[0] == 415
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/api/compare?prompt=To", headers={"Host": f"127.0.0.1:{port}"})
    assert connection.getresponse().status == 404  # POST only
    connection.close()
    # A page served without --compare has no second model: it says how to have one.
    lone = serve(AttentionExplorer(other_model(), CharTokenizer(OTHER_VOCAB), "alone"))
    try:
        status, answer = post(lone.server_address[1], {"prompt": "be"})
    finally:
        lone.shutdown()
        lone.server_close()
    assert status == 404 and "--compare" in answer["error"]


def test_explore_attention_serves_the_comparison(tmp_path, monkeypatch, capsys):
    for run in ("new", "parent"):
        (tmp_path / run).mkdir()
        save_sharp_checkpoint(tmp_path / run / "ckpt.pt")
    served = []
    real_serve = explore_attention.serve

    def keep(server):
        # The start line, with serve_forever stopped at once as by Ctrl-C.
        def interrupted():
            raise KeyboardInterrupt

        server.serve_forever = interrupted
        served.append(server)
        return real_serve(server)

    monkeypatch.setattr(explore_attention, "serve", keep)
    argv = ["--out-dir", str(tmp_path / "new"), "--port", "0", "--serve"]
    assert explore_attention.main([*argv, "--compare", str(tmp_path / "parent")]) == 0
    (server,) = served
    assert server.compare.label == str(tmp_path / "parent" / "ckpt.pt")
    new, parent = tmp_path / "new" / "ckpt.pt", tmp_path / "parent" / "ckpt.pt"
    started = capsys.readouterr().out.splitlines()[-3]
    assert started == f"attention explorer for {new}, compared with {parent} at {server.url}"
    assert page_data(server.page.decode())["compare"] == server.compare.label
    assert page_data(server.page.decode())["model"]["step"] == 0  # the checkpoint's iter_num
    # Without --compare the page's data says nothing of a second model.
    assert explore_attention.main(argv) == 0 and served[1].compare is None
    assert "compare" not in page_data(served[1].page.decode())
    assert "compare" not in page_data(render_page({"name": "x"}, served=False))
    code = explore_attention.main(
        [*argv[:2], "--prompt", "To", "--html", "x.html", "--compare", "y"]
    )
    assert code == 2 and "drop --html" in capsys.readouterr().err
