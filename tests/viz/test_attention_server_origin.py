"""The attention page's server answers its own page only: a request naming another host
(DNS rebinding: a web site that points its own name at 127.0.0.1) gets 403, and a POST
that is not JSON (a cross-site form's text/plain) or comes from another origin is
refused. Requests are sent with http.client, so every header is the test's."""

import http.client
import json
import threading

import pytest

from data.tokenizer import CharTokenizer
from tests.viz.conftest import VOCAB, save_sharp_checkpoint
from viz.attention_server import AttentionExplorer, ExplorerServer, request_refusal

BODY = json.dumps({"prompt": "To be"})


@pytest.fixture
def port(tmp_path):
    """A served sharp model on a free port of 127.0.0.1."""
    path = tmp_path / "ckpt.pt"
    model = save_sharp_checkpoint(path)
    explorer = AttentionExplorer(model, CharTokenizer(VOCAB), str(path))
    server = ExplorerServer(("127.0.0.1", 0), explorer)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def ask(port, method, path, headers, body=None) -> tuple[int, dict | bytes]:
    """Send one request with exactly ``headers`` (Host included); (status, answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body.encode())))
        connection.endheaders(body.encode() if body is not None else None)
        response = connection.getresponse()
        data = response.read()
        kind = response.getheader("Content-Type", "")
        return response.status, json.loads(data) if "json" in kind else data
    finally:
        connection.close()


def test_the_page_and_its_posts_are_answered_on_loopback_names(port):
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        status, page = ask(port, "GET", "/", {"Host": host})
        assert status == 200 and page.startswith(b"<!DOCTYPE html>"), host
        json_from_page = {"Content-Type": "application/json", "Origin": f"http://{host}"}
        status, answer = ask(port, "POST", "/api/attention", {"Host": host, **json_from_page}, BODY)
        assert status == 200 and answer["prompt"] == "To be", host
    # curl sends no Origin; a charset parameter is still JSON.
    curl = {"Host": f"localhost:{port}", "Content-Type": "application/json; charset=utf-8"}
    assert (
        ask(port, "POST", "/api/steps", curl, json.dumps({"prompt": "To be", "layer": 0}))[0] == 200
    )


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:{port}",
        "127.0.0.1.attacker.example:{port}",
        "127.0.0.1:1",
        "localhost",
        "",
    ],
)
def test_another_host_is_refused(port, host):
    host = host.format(port=port)
    headers = {"Host": host} if host else {}
    for method, path, body in (("GET", "/", None), ("GET", "/api/attention?prompt=To", None)):
        status, answer = ask(port, method, path, headers, body)
        assert status == 403, (host, path)
        assert answer["error"] == (
            f"this server answers requests for 127.0.0.1:{port} or localhost:{port}, "
            f"not {host or 'no Host header'}: open http://127.0.0.1:{port}/"
        )
    json_post = {**headers, "Content-Type": "application/json"}
    assert ask(port, "POST", "/api/attention", json_post, BODY)[0] == 403


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_post_that_is_not_json_is_refused(port, kind):
    headers = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
    if kind:
        headers["Content-Type"] = kind
    status, answer = ask(port, "POST", "/api/attention", headers, BODY)
    assert status == 415
    assert answer["error"] == (
        f"POST a JSON body with Content-Type: application/json, not {kind or 'none'}"
    )


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://localhost:1"])
def test_a_post_from_another_origin_is_refused(port, origin):
    host = f"127.0.0.1:{port}"
    headers = {"Host": host, "Content-Type": "application/json", "Origin": origin}
    status, answer = ask(port, "POST", "/api/attention", headers, BODY)
    assert status == 403
    assert (
        answer["error"] == f"POSTs come from this server's own page (http://{host}), not {origin}"
    )


def test_a_server_for_the_network_answers_address_literals_not_names():
    """--host 0.0.0.0: the machine is reached by its address; names could be rebound."""
    assert request_refusal("GET", {"Host": "192.168.1.5:8000"}, "0.0.0.0", 8000) is None
    assert request_refusal("GET", {"Host": "[fe80::1]:8000"}, "::", 8000) is None
    assert request_refusal("GET", {"Host": "evil.example:8000"}, "0.0.0.0", 8000)[0] == 403
    assert request_refusal("GET", {"Host": "192.168.1.5:8000"}, "127.0.0.1", 8000)[0] == 403
