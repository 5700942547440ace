"""The attention explorer's web page: what it shows for a prompt, and the local server.

    python explore_attention.py --out-dir runs/korean --serve      # open the printed address
    python explore_attention.py --out-dir runs/korean --prompt "새가 하늘을" \\
        --html runs/korean/attention.html                            # one prompt, one file

The page is ``viz/attention_page.html`` (plain HTML, CSS and script, no network). It
reads its data from a JSON block embedded in it: the model's description, and for
`--html` one prompt's `AttentionExplorer.explain` answer. Served, it asks for more:

    GET  /                 the page
    POST /api/attention    {"prompt": "...", "temperature": 1.0} -> explain()'s answer
    GET  /api/attention?prompt=...&temperature=1.0                 (the same, for curl)

Nothing else is served (404): no file is read by path, and the page itself is read
once, at start. A bad prompt gets HTTP 400 and ``{"error": "..."}``, which the page shows.
"""

import json
import math
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import torch

from viz.attention_weights import attention_and_next_logits, select_head
from viz.char_labels import visible_char

PAGE_TEMPLATE = Path(__file__).with_name("attention_page.html")
# The page's JSON block; `render_page` puts the data between these two.
DATA_OPEN = '<script type="application/json" id="explorer-data">'
DATA_CLOSE = "</script>"
TOP_K = 10
MAX_REQUEST_BYTES = 1 << 20  # a prompt is cropped to block_size anyway


class PromptError(ValueError):
    """A prompt (or temperature) the explorer cannot show; the message says what to change."""


def next_char_probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The next-character distribution the sampler draws from, before any top-k/top-p.

    Args:
        logits: (vocab_size,) logits of the last position.
        temperature: > 0 divides the logits before the softmax; 0 means greedy: the
            argmax (the first one, on a tie) gets probability 1, every other 0.

    Returns:
        (vocab_size,) float64 probabilities, summing to 1.
    """
    logits = logits.double()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(), logits.numel()).double()
    # softmax is shift-invariant; subtracting the maximum keeps exp() from overflowing.
    return torch.softmax((logits - logits.max()) / temperature, dim=-1)


def check_temperature(value) -> float:
    """A JSON/query temperature as a float >= 0.

    Raises:
        PromptError: for anything else (text, NaN, infinity, a negative number).
    """
    try:
        temperature = float(value)
    except (TypeError, ValueError):
        temperature = math.nan
    if isinstance(value, bool) or not math.isfinite(temperature) or temperature < 0:
        raise PromptError(
            f"temperature must be a finite number >= 0 (0 means greedy), got {value!r}"
        )
    return temperature


class AttentionExplorer:
    """A model and its tokenizer behind the page: turns a prompt into what the page draws.

    The model is put in eval mode; a lock lets one request at a time run it (the
    server answers each request in its own thread).

    Args:
        model: a GPT (its ``config`` gives n_layer, n_head, block_size).
        tokenizer: the checkpoint's CharTokenizer (``encode``, ``chars``).
        name: what the page calls the model, e.g. the checkpoint's path.
    """

    def __init__(self, model, tokenizer, name: str):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.block_size = model.config.block_size
        self._lock = threading.Lock()

    def model_info(self) -> dict:
        """The model's description for the page: name, n_layer, n_head, block_size, and
        the vocabulary in id order with each character's visible label (␣ for space)."""
        config = self.model.config
        return {
            "name": self.name,
            "n_layer": config.n_layer,
            "n_head": config.n_head,
            "block_size": self.block_size,
            "vocab": list(self.tokenizer.chars),
            "vocab_labels": [visible_char(c) for c in self.tokenizer.chars],
        }

    def explain(self, prompt: str, temperature: float = 1.0) -> dict:
        """Everything the page shows for one prompt.

        A prompt longer than block_size is cropped to its last block_size characters
        (the ones the model would use to predict the next, as sample.py does), and
        ``notes`` says so.

        Args:
            prompt: the text, 1 or more characters of the model's vocabulary.
            temperature: >= 0, for ``next`` (the page can change it without asking again).

        Returns:
            A JSON-ready dict:
            ``prompt`` the text shown (after cropping), ``chars`` its characters (T),
            ``labels`` their visible labels, ``weights`` (n_layer, n_head, T, T) nested
            lists, ``average`` (n_layer, T, T) the mean over heads (as the CLI computes
            it), ``logits`` (vocab_size,) of the last position, ``temperature``, ``next``
            the TOP_K likeliest next characters as ``{"id", "char", "label",
            "probability"}``, most likely first (by logit: the same order at every
            temperature; ties by id), and ``notes`` (list of str).

        Raises:
            PromptError: if the prompt is empty or not text, holds characters outside the
                vocabulary (the tokenizer's message: each one with its code point and
                position), or the temperature is not a number >= 0.
        """
        if not isinstance(prompt, str):
            raise PromptError(f"the prompt must be text, got {type(prompt).__name__}")
        if not prompt:
            raise PromptError("the prompt is empty: type at least one character")
        prompt = self.tokenizer.normalize(prompt)  # the characters the model reads
        temperature = check_temperature(temperature)
        try:
            ids = self.tokenizer.encode(prompt)  # the whole prompt: positions as typed
        except ValueError as e:  # CorpusError: lists the unknown characters
            raise PromptError(str(e)) from None
        notes = []
        if len(prompt) > self.block_size:
            notes.append(
                f"The prompt has {len(prompt)} characters, more than the model's block_size "
                f"({self.block_size}): showing its last {self.block_size}, the ones the model "
                "uses to predict the next character."
            )
            prompt, ids = prompt[-self.block_size :], ids[-self.block_size :]
        with self._lock:
            weights, logits = attention_and_next_logits(
                self.model, torch.from_numpy(ids.astype("int64"))
            )
        average = torch.stack([select_head(weights, layer) for layer in range(weights.size(0))])
        probs = next_char_probabilities(logits, temperature)
        # Ranked by the logits, the same order at every temperature: at 0 every
        # probability but the first is 0, and would leave the rest in vocabulary order.
        top = torch.sort(logits, descending=True, stable=True).indices[:TOP_K].tolist()
        chars = self.tokenizer.chars
        return {
            "prompt": prompt,
            "chars": list(prompt),
            "labels": [visible_char(c) for c in prompt],
            "weights": weights.tolist(),
            "average": average.tolist(),
            "logits": logits.tolist(),
            "temperature": temperature,
            "next": [
                {"id": i, "char": chars[i], "label": visible_char(chars[i]), "probability": p}
                for i, p in zip(top, probs[top].tolist(), strict=True)
            ],
            "notes": notes,
        }


def render_page(info: dict, result: dict | None = None, *, served: bool) -> str:
    """The page with its data embedded, as one self-contained HTML document.

    Args:
        info: `AttentionExplorer.model_info`.
        result: `AttentionExplorer.explain` for the prompt to show first, or None.
        served: True when a server answers /api/attention (the page then offers
            "append and continue"); False for a file opened from disk.

    Raises:
        OSError: if the page template cannot be read.
    """
    template = PAGE_TEMPLATE.read_text(encoding="utf-8")
    data = json.dumps({"served": served, "model": info, "result": result}, ensure_ascii=False)
    # Inside <script>, "</script>" or "<!--" in a prompt would end the block early;
    # \u003c is the same character to the JSON parser and harmless to the HTML one.
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    before, placeholder, after = template.partition(DATA_OPEN + "null" + DATA_CLOSE)
    if not placeholder:
        raise OSError(f"{PAGE_TEMPLATE} lacks its data block {DATA_OPEN}null{DATA_CLOSE}")
    return before + DATA_OPEN + data + DATA_CLOSE + after


class ExplorerRequestHandler(BaseHTTPRequestHandler):
    """Answers GET / (the page) and /api/attention (GET or POST); everything else is 404.

    The server it runs under is an `ExplorerServer` (``self.server.explorer``,
    ``self.server.page``).
    """

    server_version = "MiniGPTAttentionExplorer"

    def do_GET(self):  # noqa: N802  (the name http.server calls)
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, self.server.page, "text/html; charset=utf-8")
        elif url.path == "/api/attention":
            query = parse_qs(url.query, keep_blank_values=True)
            self._answer(query.get("prompt", [""])[0], query.get("temperature", ["1"])[0])
        else:
            self._send_error(HTTPStatus.NOT_FOUND, f"nothing at {url.path}: open / instead")

    def do_POST(self):  # noqa: N802
        if urlsplit(self.path).path != "/api/attention":
            self._send_error(HTTPStatus.NOT_FOUND, "POST goes to /api/attention")
            return
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REQUEST_BYTES:
            self._send_error(HTTPStatus.BAD_REQUEST, "the request must be at most 1 MiB")
            self.close_connection = True
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            self._send_error(
                HTTPStatus.BAD_REQUEST, 'send JSON such as {"prompt": "To be", "temperature": 1}'
            )
            return
        self._answer(body.get("prompt", ""), body.get("temperature", 1.0))

    def _answer(self, prompt, temperature) -> None:
        try:
            result = self.server.explorer.explain(prompt, temperature)
        except PromptError as e:
            self._send_error(HTTPStatus.BAD_REQUEST, str(e))
            return
        self._send_json(HTTPStatus.OK, result)

    def _send_error(self, status: HTTPStatus, message: str) -> None:
        self._send_json(status, {"error": message})

    def _send_json(self, status: HTTPStatus, payload: dict) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002  (http.server's signature)
        """Quiet: a learner's terminal should not fill with one line per click."""


class ExplorerServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer holding the explorer and the rendered page.

    Args:
        address: (host, port); port 0 picks any free port (see ``server_address``).
        explorer: the `AttentionExplorer` that answers /api/attention.
        first_prompt: a prompt the page shows on opening, or None (the page asks).

    Raises:
        OSError: if the address cannot be bound (port in use, unknown host), or the
            page template cannot be read.
        PromptError: if ``first_prompt`` cannot be shown.
    """

    daemon_threads = True  # Ctrl-C does not wait for a browser's open connection

    def __init__(self, address, explorer: AttentionExplorer, first_prompt: str | None = None):
        first = explorer.explain(first_prompt) if first_prompt is not None else None
        self.explorer = explorer
        self.page = render_page(explorer.model_info(), first, served=True).encode("utf-8")
        super().__init__(address, ExplorerRequestHandler)

    @property
    def url(self) -> str:
        """The address to open, e.g. http://127.0.0.1:8000/."""
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"
