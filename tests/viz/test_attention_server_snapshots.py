"""The page at a snapshot (viz/snapshot_explorers.py, viz/attention_server.py): it
shows exactly what a forward pass of that snapshot's weights gives; explore_attention.py
--at-step picks the nearest snapshot."""

import json
import shutil
import threading
import urllib.request

import pytest
import torch

import explore_attention
from model.checkpoint import load_checkpoint, model_from_checkpoint
from tests.viz.conftest import write_snapshot_run as make_run
from viz.attention_server import AttentionExplorer, ExplorerServer
from viz.attention_weights import attention_and_next_logits
from viz.snapshot_explorers import SnapshotExplorers
from viz.snapshots import SNAPSHOTS_DIR

PROMPT = "abcab ha"


@pytest.fixture
def served(tmp_path):
    models = make_run(tmp_path)
    path = tmp_path / SNAPSHOTS_DIR / "step_0000005.pt"
    first, tokenizer = model_from_checkpoint(load_checkpoint(path))
    snapshots = SnapshotExplorers(tmp_path, torch.device("cpu"))
    server = ExplorerServer(
        ("127.0.0.1", 0), AttentionExplorer(first, tokenizer, "x"), snapshots=snapshots
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield tmp_path, models, server.url
    server.shutdown()
    server.server_close()


def ask(url: str, path: str, payload: dict | None = None) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}  # the server refuses other POSTs
    request = urllib.request.Request(url + path, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.loads(r.read())


def test_the_page_at_a_snapshot_is_that_snapshots_forward_pass(served):
    folder, models, url = served
    listing = ask(url, "api/snapshots")["snapshots"]
    assert [(s["step"], s["sample"], s["best"]) for s in listing] == [
        (5, "sample 5", False),
        (50, "sample 50", True),
    ]
    assert listing[1]["val_loss"] == pytest.approx(3.5)
    answer = ask(url, "api/attention", {"prompt": PROMPT, "step": 40})  # nearest: 50
    snapshot = load_checkpoint(folder / SNAPSHOTS_DIR / "step_0000050.pt")
    model, tokenizer = model_from_checkpoint(snapshot)
    weights, logits = attention_and_next_logits(
        model, torch.tensor(tokenizer.encode(PROMPT).astype("int64"))
    )
    torch.testing.assert_close(torch.tensor(answer["weights"]), weights, rtol=0, atol=1e-6)
    torch.testing.assert_close(torch.tensor(answer["logits"]), logits, rtol=0, atol=1e-5)
    # The stored weights are the trained ones rounded to float16.
    emb = models[50].token_embedding.weight.detach()
    assert torch.equal(model.token_embedding.weight, emb.half().float())
    early = ask(url, "api/attention", {"prompt": PROMPT, "step": 1})  # nearest: 5
    assert early["weights"] != answer["weights"]
    assert ask(url, "api/attention", {"prompt": PROMPT})["weights"] == early["weights"]
    steps = ask(url, "api/steps", {"prompt": PROMPT, "layer": 0, "head": 1, "step": 50})
    assert steps == json.loads(
        json.dumps(AttentionExplorer(model, tokenizer, "x").steps(PROMPT, 0, 1), ensure_ascii=False)
    )


def test_at_step_picks_the_nearest_snapshot(tmp_path, capsys):
    make_run(tmp_path)
    shutil.copy(tmp_path / SNAPSHOTS_DIR / "step_0000050.pt", tmp_path / "ckpt.pt")
    argv = ["--out-dir", str(tmp_path), "--prompt", PROMPT, "--layer", "0", "--head", "0"]
    assert explore_attention.main([*argv, "--at-step", "30", "--steps"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("snapshot at step 50 (val loss 3.500 nats/char)")
    assert "step_0000050.pt: layer 0" in out
    html = tmp_path / "page.html"
    png = tmp_path / "a.png"
    assert (
        explore_attention.main([*argv, "--at-step", "0", "--html", str(html), "--png", str(png)])
        == 0
    )
    assert "snapshot at step 5 " in capsys.readouterr().out and html.is_file()


def test_at_step_without_snapshots_says_how_to_have_them(tmp_path, capsys):
    make_run(tmp_path)
    (tmp_path / SNAPSHOTS_DIR / "index.json").unlink()
    argv = [
        "--out-dir",
        str(tmp_path),
        "--checkpoint",
        str(tmp_path / SNAPSHOTS_DIR / "step_0000005.pt"),
    ]
    assert explore_attention.main([*argv, "--prompt", PROMPT, "--at-step", "3"]) == 2
    assert "train.snapshots" in capsys.readouterr().err


def test_every_view_at_a_snapshot_is_that_snapshots_own(served):
    """The next-character table, what each layer would predict and a what-if, asked at
    step 50, are those of snapshot 50's weights, not the served model's (snapshot 5's)."""
    folder, _, url = served
    snapshot = load_checkpoint(folder / SNAPSHOTS_DIR / "step_0000050.pt")
    model, tokenizer = model_from_checkpoint(snapshot)
    ids = torch.tensor(tokenizer.encode(PROMPT).astype("int64"))
    switched = {"layer": 0, "head": 1, "switches": ["uniform"]}
    answer = ask(url, "api/attention", {"prompt": PROMPT, "step": 50, **switched})
    own = ask(url, "api/attention", {"prompt": PROMPT, "step": 50})
    # The model's own next character and the what-if's own numbers: a forward pass.
    _, logits = attention_and_next_logits(model, ids)
    probs = torch.softmax(logits.double(), dim=-1)
    assert [n["probability"] for n in own["next"]] == pytest.approx(
        torch.sort(probs, descending=True, stable=True).values[:10].tolist(), abs=1e-6
    )
    torch.testing.assert_close(torch.tensor(answer["model"]["logits"]), logits, rtol=0, atol=1e-5)
    # The lens's last layer is the model's own prediction.
    assert own["lens"]["ids"][-1][-1][0] == int(logits.argmax())  # (n_layer, T, top_k)
    # Every view equals the explorer of snapshot 50's model, switched and not.
    reference = AttentionExplorer(model, tokenizer, "x")
    what_if = reference.what_if(0, 1, ["uniform"])
    for got, expected in (
        (own, reference.explain(PROMPT)),
        (answer, reference.explain(PROMPT, 1.0, what_if)),
    ):
        assert got == json.loads(json.dumps(expected, ensure_ascii=False))
    assert answer["what_if"]["switches"] == ["uniform"]
    served_model = ask(url, "api/attention", {"prompt": PROMPT})
    assert own["lens"] != served_model["lens"] and own["next"] != served_model["next"]
