"""The attention explorer's web page: what it shows for a prompt, and the local server.

    python explore_attention.py --out-dir runs/korean --serve      # open the printed address
    python explore_attention.py --out-dir runs/korean --prompt "새가 하늘을" \\
        --html runs/korean/attention.html                            # one prompt, one file

The page is ``viz/attention_page.html`` with its scripts in ``viz/page/`` (plain HTML,
CSS and script, no network; see viz/page_files.py). It reads its data from a JSON block
embedded in it: the model's description, and for `--html` one prompt's
`AttentionExplorer.explain` answer and the steps of every layer and head
(`AttentionExplorer.all_steps`). Served, it asks for more:

    GET  /                 the page
    GET  /page/<name>.js   its scripts (only those the page names)
    POST /api/attention    {"prompt": "...", "temperature": 1.0} -> explain()'s answer
    POST /api/steps        {"prompt": "...", "layer": 0, "head": 1} -> steps()'s answer
    GET  /api/attention?prompt=...&temperature=1.0                 (the same, for curl)
    GET  /api/steps?prompt=...&layer=0&head=1&switches=no_mask,uniform
    GET  /api/snapshots    the run's snapshots: [{"step", "val_loss", "sample", "best"}]
    POST /api/compare      {"prompt": "..."} -> the same prompt through this model and a
                           second (`explore_attention.py --compare`; viz/model_compare.py)

With a run's snapshots (`viz.snapshot_explorers`), both API paths take ``"step": N``:
the answer is then that of the snapshot nearest step N, its own weights.

Both take what-if switches (viz/attention_steps.py `SWITCHES`) for one head:
``"layer": 0, "head": 1, "switches": ["no_mask"]``; the answer then holds the switched
forward pass, marked as such, and the model's own numbers to compare with. The block's
switches (`BLOCK_SWITCHES`) zero a head, the layer's MLP, or one neuron
(``"switches": ["zero_neuron"], "neuron": 17``).

Both take ``"encoding": "float32"`` for tables packed as float32 bytes instead of
nested lists (viz/array_encoding.py: a quarter of the size, far faster to write);
/api/steps takes ``"extras": ["words", "projections", "block", "attribution"]`` for
more than the chapters' steps, and ``"cell": {"part": "q", "row": 3, "column": 5}`` or
``"neuron_cell": {"row": 3, "neuron": 17}`` for one cell's derivation
(viz/steps_extras.py). In a GET query: ``extras=words,block&cell=q,3,5``.

Nothing else is served (404): no file is read by path, and the page and its scripts
are read once, at start. A bad prompt gets HTTP 400 and ``{"error": "..."}``, which the page shows.

Other web sites are kept out (`request_refusal`): a request must name this server in
its ``Host`` header (a loopback name, or an address literal when serving beyond this
machine) with its port, else 403, so a site that points its own name at 127.0.0.1
(DNS rebinding) reads nothing; a POST must be JSON (415) and come from the page's
own origin (403), so a cross-site form cannot submit one.
"""

import ipaddress
import json
import math
import threading
from collections import OrderedDict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import torch

from viz.array_encoding import ENCODINGS, encode_arrays
from viz.attention_presets import prompt_presets
from viz.attention_steps import (
    BLOCK_SWITCHES,
    SWITCHES,
    ForwardRecord,
    WhatIf,
    record_forward,
    steps_json,
    what_if_json,
)
from viz.attention_weights import select_head
from viz.char_labels import visible_char
from viz.logit_lens import layer_predictions
from viz.messages import CATALOGUE, Message, check_language, message_json
from viz.model_compare import ComparedModel, compare_models, comparison_json
from viz.page_files import PAGE_TEMPLATE, inline_scripts, page_scripts
from viz.steps_extras import EXTRAS, extras_json

# The page's JSON block; `render_page` puts the data between these two.
DATA_OPEN = '<script type="application/json" id="explorer-data">'
DATA_CLOSE = "</script>"
# The block of its words: the catalogue (viz/messages.py) and the language asked for.
MESSAGES_OPEN = '<script type="application/json" id="page-messages">'

TOP_K = 10
LENS_TOP_K = 5  # characters per layer in "what each layer would predict"
MAX_REQUEST_BYTES = 1 << 20  # a prompt is cropped to block_size anyway
# Forward passes kept, so that a click on another head or a switch turned back off
# reads the pass already made: the model's own and the switched one for a prompt.
KEPT_PASSES = 4


class PromptError(ValueError):
    """A prompt (or temperature) the explorer cannot show; the message says what to change.

    Args:
        text: the message, in English.
        message: the same as a catalogue message (viz/messages.py), for the page to
            show in its own language; None where only the English exists.
    """

    def __init__(self, text: str, message: Message | None = None):
        super().__init__(text)
        self.message = message


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


def check_index(value, name: str, count: int) -> int:
    """A JSON/query layer or head as an int in 0..count-1 (-count..-1 count from the end).

    Raises:
        PromptError: naming the field and its range.
    """
    try:
        index = int(value) if not isinstance(value, (bool, float)) else None
    except (TypeError, ValueError):
        index = None
    if index is None or not -count <= index < count:
        raise PromptError(f"{name} must be a whole number in 0..{count - 1}, got {value!r}")
    return index % count


def check_switches(value) -> tuple[str, ...]:
    """A JSON list (or a comma-separated query string) of what-if switch names.

    Raises:
        PromptError: for anything but known names.
    """
    if isinstance(value, str):
        value = [part for part in value.split(",") if part]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PromptError(f"switches must be a list of names such as {list(SWITCHES)[:2]}")
    unknown = [v for v in value if v not in SWITCHES and v not in BLOCK_SWITCHES]
    if unknown:
        raise PromptError(
            f"unknown switch {', '.join(map(repr, unknown))}: the switches are "
            f"{', '.join([*SWITCHES, *BLOCK_SWITCHES])}"
        )
    return tuple(value)


def check_prompt(value) -> str:
    """A prompt as typed: non-empty text (checked before the tokenizer reads it).

    Raises:
        PromptError: if it is not text, or is empty (each with its catalogue message).
    """
    if not isinstance(value, str):
        kind = type(value).__name__
        raise PromptError(
            f"the prompt must be text, got {kind}", Message("error.not_text", {"type": kind})
        )
    if not value:
        raise PromptError(
            "the prompt is empty: type at least one character", Message("error.empty")
        )
    return value


def check_encoding(value) -> str:
    """A JSON/query encoding name, one of `viz.array_encoding.ENCODINGS`.

    Raises:
        PromptError: for anything else.
    """
    if value not in ENCODINGS:
        raise PromptError(f"encoding must be one of {', '.join(ENCODINGS)}, got {value!r}")
    return value


class AttentionExplorer:
    """A model and its tokenizer behind the page: turns a prompt into what the page draws.

    Every number comes from `viz.attention_steps.record_forward`: one eval-mode forward
    pass (no dropout) that keeps every step. The model is put in eval mode; a lock
    lets one request at a time run it (the server answers each request in its own
    thread), and the last KEPT_PASSES passes are kept for the next clicks.

    Args:
        model: a GPT (its ``config`` gives n_layer, n_head, block_size).
        tokenizer: the checkpoint's CharTokenizer (``encode``, ``chars``).
        name: what the page calls the model, e.g. the checkpoint's path.
        own_text: a few lines of the run's own text offered as presets (e.g. its
            train.attention_prompt); see `viz.attention_presets.prompt_presets`.
        step: the training step of the model's weights (the checkpoint's), or None.
    """

    def __init__(
        self, model, tokenizer, name: str, own_text: tuple[str, ...] = (), step: int | None = None
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.step = step
        self.block_size = model.config.block_size
        self.own_text = tuple(own_text)
        self._lock = threading.Lock()
        self._passes: OrderedDict[tuple, ForwardRecord] = OrderedDict()

    def model_info(self) -> dict:
        """The model's description for the page: name, n_layer, n_head, n_embd, d_k,
        block_size, position ("learned" or "rope"), norm, qk_norm, the vocabulary in
        id order with each character's visible label (␣ for space), the preset prompts
        (`prompt_presets`), the what-if switches ``[{"key", "text"}]`` of a head's
        steps ("switches") and of the block ("block_switches"), the steps' "extras"
        and the answers' "encodings", and the weights' training "step" (None: unknown)."""
        config = self.model.config
        return {
            "name": self.name,
            "step": self.step,
            "n_layer": config.n_layer,
            "n_head": config.n_head,
            "n_embd": config.n_embd,
            "d_k": config.head_size,
            "block_size": self.block_size,
            "position": config.position,
            "norm": config.norm,
            "qk_norm": config.qk_norm,
            "vocab": list(self.tokenizer.chars),
            "vocab_labels": [visible_char(c) for c in self.tokenizer.chars],
            "presets": prompt_presets(self.tokenizer, self.block_size, self.own_text),
            "switches": [{"key": key, "text": text} for key, text in SWITCHES.items()],
            "block_switches": [{"key": key, "text": text} for key, text in BLOCK_SWITCHES.items()],
            "extras": list(EXTRAS),
            "encodings": list(ENCODINGS),
        }

    def prepare(self, prompt) -> tuple[str, torch.Tensor, list[Message]]:
        """A prompt as the model reads it: ``(text, (T,) int64 ids, notes)``, the notes
        messages of the catalogue (viz/messages.py).

        A prompt longer than block_size is cropped to its last block_size characters
        (the ones the model would use to predict the next, as sample.py does), and a
        note says so.

        Raises:
            PromptError: if the prompt is empty or not text, or holds characters
                outside the vocabulary (the tokenizer's message: each one with its code
                point and position).
        """
        check_prompt(prompt)
        prompt = self.tokenizer.normalize(prompt)  # the characters the model reads
        try:
            ids = self.tokenizer.encode(prompt)  # the whole prompt: positions as typed
        except ValueError as e:  # CorpusError: lists the unknown characters
            raise PromptError(str(e), self.unknown_message(prompt)) from None
        notes = []
        if len(prompt) > self.block_size:
            notes.append(
                Message("note.cropped", {"length": len(prompt), "block_size": self.block_size})
            )
            prompt, ids = prompt[-self.block_size :], ids[-self.block_size :]
        return prompt, torch.from_numpy(ids.astype("int64")), notes

    def unknown_message(self, prompt: str) -> Message:
        """The characters of ``prompt`` outside the vocabulary, each with its code point
        and first position, as a catalogue message."""
        known = set(self.tokenizer.chars)
        first: dict[str, int] = {}
        for position, char in enumerate(prompt):
            if char not in known:
                first.setdefault(char, position)
        listed = ", ".join(f"{c!r} (U+{ord(c):04X}): {p}" for c, p in first.items())
        return Message("error.unknown_chars", {"n": len(first), "chars": listed})

    def what_if(self, layer=None, head=None, switches=(), neuron=None) -> WhatIf | None:
        """Checked what-if switches for one head (or its layer's MLP, or ``neuron`` of
        that MLP with "zero_neuron"), or None when no switch is on.

        Raises:
            PromptError: for an unknown switch, or a layer, head or neuron out of range.
        """
        names = check_switches(switches)
        if "zero_neuron" in names:
            neuron = check_index(neuron, "neuron", self.model.blocks[0].mlp.up_proj.out_features)
        elif neuron is not None:
            raise PromptError('a neuron is for the switch "zero_neuron": add it, or drop neuron')
        if not names:
            return None
        config = self.model.config
        return WhatIf(
            check_index(layer, "layer", config.n_layer),
            check_index(head, "head", config.n_head),
            names,
            neuron,
        )

    def forward(self, ids: torch.Tensor, what_if: WhatIf | None = None) -> ForwardRecord:
        """`record_forward` of ``ids``, or the same pass kept from an earlier request."""
        key = (tuple(ids.tolist()), what_if)
        with self._lock:
            if key not in self._passes:
                self._passes[key] = record_forward(self.model, ids, what_if)
                while len(self._passes) > KEPT_PASSES:
                    self._passes.popitem(last=False)
            self._passes.move_to_end(key)
            return self._passes[key]

    def explain(
        self,
        prompt: str,
        temperature: float = 1.0,
        what_if: WhatIf | None = None,
        encoding: str = "json",
    ) -> dict:
        """Everything the page shows for one prompt, but the steps (`steps`).

        Args:
            prompt: the text, 1 or more characters of the model's vocabulary; longer
                than block_size, its last block_size (see `prepare`).
            temperature: >= 0, for ``next`` (the page can change it without asking again).
            what_if: switches for one head (`what_if`), or None: the model's own pass.
            encoding: "json" (tables as nested lists) or "float32" (packed:
                `viz.array_encoding.packed`).

        Returns:
            A JSON-ready dict:
            ``prompt`` the text shown (after cropping), ``chars`` its characters (T),
            ``labels`` their visible labels, ``weights`` (n_layer, n_head, T, T) nested
            lists, ``average`` (n_layer, T, T) the mean over heads (as the CLI computes
            it), ``logits`` (vocab_size,) of the last position, ``temperature``, ``next``
            the TOP_K likeliest next characters as ``{"id", "char", "label",
            "probability"}``, most likely first (by logit: the same order at every
            temperature; ties by id), ``lens`` what each layer would predict at each
            position (`viz.logit_lens.layer_predictions`, LENS_TOP_K characters),
            ``what_if`` None or the switches (`viz.attention_steps.what_if_json`),
            ``model`` None or, under switches, the model's own ``logits`` and
            ``head_weights`` (T, T) of the switched head, to compare with, and
            ``changed``: each position whose likeliest next character the switch
            changes, as ``{"position", "own", "what_if"}`` (token ids); and ``notes``
            (catalogue messages ``{"key", "args"}``).

        Raises:
            PromptError: for a prompt `prepare` refuses, a temperature that is not a
                number >= 0, or an unknown encoding.
        """
        encoding = check_encoding(encoding)
        prompt, ids, notes = self.prepare(prompt)
        temperature = check_temperature(temperature)
        record = self.forward(ids, what_if)
        weights = torch.stack([kept["weights"][0] for kept in record.layers]).float().cpu()
        logits = record.logits[0, -1].float().cpu()
        average = torch.stack([select_head(weights, layer) for layer in range(weights.size(0))])
        probs = next_char_probabilities(logits, temperature)
        # Ranked by the logits, the same order at every temperature: at 0 every
        # probability but the first is 0, and would leave the rest in vocabulary order.
        top = torch.sort(logits, descending=True, stable=True).indices[:TOP_K].tolist()
        chars = self.tokenizer.chars
        model = None
        if record.what_if is not None:  # the model's own numbers, to compare with
            own = self.forward(ids)
            head_weights = own.layers[record.what_if.layer]["weights"][0, record.what_if.head]
            own_best = own.logits[0].argmax(-1).tolist()  # (T,) at every position
            best = record.logits[0].argmax(-1).tolist()
            model = {
                "logits": own.logits[0, -1],
                "head_weights": head_weights,
                "changed": [
                    {"position": p, "own": a, "what_if": b}
                    for p, (a, b) in enumerate(zip(own_best, best, strict=True))
                    if a != b
                ],
            }
        answer = {
            "prompt": prompt,
            "chars": list(prompt),
            "labels": [visible_char(c) for c in prompt],
            "weights": weights,
            "average": average,
            "logits": logits,
            "temperature": temperature,
            "next": [
                {"id": i, "char": chars[i], "label": visible_char(chars[i]), "probability": p}
                for i, p in zip(top, probs[top].tolist(), strict=True)
            ],
            "lens": layer_predictions(self.model, record, LENS_TOP_K),
            "what_if": what_if_json(record.what_if),
            "model": model,
            "notes": [message_json(note) for note in notes],
        }
        return encode_arrays(answer, encoding)

    def steps(
        self,
        prompt: str,
        layer: int,
        head: int,
        what_if: WhatIf | None = None,
        encoding: str = "json",
        extras=(),
        cell=None,
        neuron_cell=None,
    ) -> dict:
        """The step-by-step tables of one head (`viz.attention_steps.steps_json`), from
        the same forward pass as `explain` (under the same switches), with the
        requested ``extras``, ``cell`` and ``neuron_cell``
        (`viz.steps_extras.extras_json`), tables written in ``encoding``.

        Raises:
            PromptError: for a prompt `prepare` refuses, a layer or head out of range,
                an unknown encoding or extra, or a cell out of range.
        """
        config = self.model.config
        layer = check_index(layer, "layer", config.n_layer)
        head = check_index(head, "head", config.n_head)
        encoding = check_encoding(encoding)
        prompt, ids, _ = self.prepare(prompt)
        record = self.forward(ids, what_if)
        answer = steps_json(record, layer, [head], encoding=None)
        try:
            answer |= extras_json(
                self.model,
                record,
                prompt,
                layer,
                head,
                extras,
                cell,
                neuron_cell,
                self.tokenizer.chars,
            )
        except ValueError as e:
            raise PromptError(str(e)) from None
        answer["prompt"] = prompt
        return encode_arrays(answer, encoding)

    def all_steps(self, prompt: str) -> list[dict]:
        """The steps of every layer and every head of the model's own pass, for a page
        that cannot ask (``--html``): one `steps_json` per layer, with every extra
        (`viz.steps_extras.EXTRAS`) under "extras": {str(head): extras_json}.

        Raises:
            PromptError: for a prompt `prepare` refuses.
        """
        prompt, ids, _ = self.prepare(prompt)
        record = self.forward(ids)
        heads = list(range(self.model.config.n_head))
        answers = []
        for layer in range(len(record.layers)):
            answer = steps_json(record, layer, heads, encoding=None)
            answer["extras"] = {
                str(head): extras_json(
                    self.model, record, prompt, layer, head, EXTRAS, chars=self.tokenizer.chars
                )
                for head in heads
            }
            answers.append(encode_arrays(answer))
        return answers

    def compare(self, other: ComparedModel, prompt, encoding: str = "json") -> dict:
        """The same prompt through this model (A) and ``other`` (B), side by side:
        `viz.model_compare.comparison_json` of `compare_models`, each model's
        (n_layer, n_head, T, T) weights written in ``encoding``, with the visible labels
        of the characters shown (``labels``: {char: label}).

        A prompt with a character one model lacks is no error: that model's entry lists
        it under ``missing`` and has no numbers (nor have the differences).

        Raises:
            PromptError: if the prompt is empty or not text, or the encoding unknown.
        """
        encoding = check_encoding(encoding)
        check_prompt(prompt)
        mine = ComparedModel(self.name, self.model, self.tokenizer)
        with self._lock:  # the same model as `forward`'s: one request at a time
            result = compare_models(mine, other, prompt, TOP_K)
        answer = comparison_json(result)
        shown = set()
        for entry, side in zip(answer["models"], result["models"], strict=True):
            shown |= set(side["prompt"]) | set(side["missing"])
            if "weights" in side:
                entry["weights"] = side["weights"]  # the tensor: packed under "float32"
                shown |= {c for c, _ in side["next"]} | {c for c, _ in side["layers"]}
        answer["labels"] = {c: visible_char(c) for c in sorted(shown)}
        return encode_arrays(answer, encoding)


def render_page(
    info: dict,
    result: dict | None = None,
    *,
    served: bool,
    steps: list[dict] | None = None,
    lang: str | None = None,
    compare: str | None = None,
) -> str:
    """The page with its data embedded, as one self-contained HTML document.

    Args:
        info: `AttentionExplorer.model_info`.
        result: `AttentionExplorer.explain` for the prompt to show first, or None.
        served: True when a server answers /api/attention and /api/steps (the page
            then offers "append and continue" and the what-if switches); False for a
            file opened from disk.
        steps: for a file, `AttentionExplorer.all_steps` of ``result``'s prompt (a
            served page asks for the steps it shows).
        lang: "en" or "ko", the language the page opens in; None follows the
            browser's (either way the page has a switch, and ?lang= in its address).
        compare: the second model's label when the server answers /api/compare (the
            page then shows both models side by side), else None (and no "compare" in
            the data).

    Raises:
        OSError: if the page template cannot be read.
        ValueError: for a language the catalogue lacks.
    """
    template = PAGE_TEMPLATE.read_text(encoding="utf-8")
    if not served:  # a file opened from disk has no server to ask for its scripts
        template = inline_scripts(template, page_scripts(template))
    payload = {"served": served, "model": info, "result": result, "steps": steps}
    if compare is not None:
        payload["compare"] = compare
    words = {"lang": None if lang is None else check_language(lang), "messages": CATALOGUE}
    for opening, value in ((DATA_OPEN, payload), (MESSAGES_OPEN, words)):
        data = json.dumps(value, ensure_ascii=False)
        # Inside <script>, "</script>" or "<!--" in a prompt would end the block early;
        # \u003c is the same character to the JSON parser and harmless to the HTML one.
        data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        before, placeholder, after = template.partition(opening + "null" + DATA_CLOSE)
        if not placeholder:
            raise OSError(f"{PAGE_TEMPLATE} lacks its data block {opening}null{DATA_CLOSE}")
        template = before + opening + data + DATA_CLOSE + after
    return template


API = ("/api/attention", "/api/steps")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_address_literal(name: str) -> bool:
    """Whether a Host header's name is an IP address (``10.0.0.2``, ``[fe80::1]``),
    which no web site can rebind, rather than a domain name."""
    try:
        ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    return True


def request_refusal(
    method: str, headers, bound_host: str, port: int
) -> tuple[HTTPStatus, str] | None:
    """Why a request to the page's server is refused, or None to answer it.

    A web page the user visits can send requests to 127.0.0.1, and by pointing its
    own domain there (DNS rebinding) read the answers. So the ``Host`` header must
    be a loopback name (or, when the server listens beyond this machine, an address
    literal) with the server's port; and a POST, which a cross-site form could send
    as text/plain, must be ``application/json`` from the page's own origin (a
    missing ``Origin``, as curl sends, is accepted).

    Args:
        method: "GET" or "POST".
        headers: the request's headers (``email.message.Message``-like: ``.get``).
        bound_host: the address the server listens on ("127.0.0.1", "0.0.0.0", ...).
        port: the port it listens on.

    Returns:
        (HTTP status, one-line message naming what to do) or None.
    """
    host = headers.get("Host", "")
    name, _, given_port = host.rpartition(":")
    loopback = bound_host in ("127.0.0.1", "localhost", "::1")
    known = name in LOOPBACK_NAMES or name == bound_host
    known = known or (not loopback and is_address_literal(name))
    if not known or given_port != str(port):
        return (
            HTTPStatus.FORBIDDEN,
            f"this server answers requests for 127.0.0.1:{port} or localhost:{port}, "
            f"not {host or 'no Host header'}: open http://127.0.0.1:{port}/",
        )
    if method != "POST":
        return None
    kind = headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return (
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            f"POST a JSON body with Content-Type: application/json, not {kind or 'none'}",
        )
    origin = headers.get("Origin")
    if origin is not None and origin != f"http://{host}":
        return (
            HTTPStatus.FORBIDDEN,
            f"POSTs come from this server's own page (http://{host}), not {origin}",
        )
    return None


SNAPSHOTS_API = "/api/snapshots"  # GET: the run's snapshots (viz.snapshot_explorers)
COMPARE_API = "/api/compare"  # POST: the prompt through a second model (--compare)


class ExplorerRequestHandler(BaseHTTPRequestHandler):
    """Answers GET / (the page), /api/attention and /api/steps (GET or POST),
    /api/snapshots (GET) and /api/compare (POST; see the module docstring); everything
    else is 404.

    The server it runs under is an `ExplorerServer` (``self.server.explorer``,
    ``self.server.page``).
    """

    server_version = "MiniGPTAttentionExplorer"

    def do_GET(self):  # noqa: N802  (the name http.server calls)
        if self._refused("GET"):
            return
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, self.server.page, "text/html; charset=utf-8")
        elif url.path in self.server.scripts:
            script = self.server.scripts[url.path]
            self._send(HTTPStatus.OK, script, "text/javascript; charset=utf-8")
        elif url.path == SNAPSHOTS_API:
            snapshots = self.server.snapshots
            self._send_json(HTTPStatus.OK, {"snapshots": snapshots.listing() if snapshots else []})
        elif url.path in API:
            query = parse_qs(url.query, keep_blank_values=True)
            self._answer(url.path, {key: values[0] for key, values in query.items()})
        else:
            self._send_error(HTTPStatus.NOT_FOUND, f"nothing at {url.path}: open / instead")

    def do_POST(self):  # noqa: N802
        if self._refused("POST"):
            return
        path = urlsplit(self.path).path
        if path not in (*API, COMPARE_API):
            self._send_error(
                HTTPStatus.NOT_FOUND, "POST goes to /api/attention, /api/steps or /api/compare"
            )
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
        if path == COMPARE_API:
            self._answer_compare(body)
        else:
            self._answer(path, body)

    def _refused(self, method: str) -> bool:
        """Send `request_refusal`'s answer, if any; True when the request was refused
        (its body, if any, unread: the connection is closed)."""
        bound_host, port = self.server.server_address[:2]
        refusal = request_refusal(method, self.headers, bound_host, port)
        if refusal is None:
            return False
        self._send_error(*refusal)
        self.close_connection = True
        return True

    def _answer(self, path: str, fields: dict) -> None:
        """Answer /api/attention or /api/steps from the request's fields."""
        explorer = self.server.explorer
        prompt = fields.get("prompt", "")
        layer, head = fields.get("layer", -1), fields.get("head", 0)
        encoding = fields.get("encoding", "json")
        try:
            if fields.get("step") not in (None, "") and self.server.snapshots is not None:
                # The model as of that snapshot (the nearest); a ValueError names the fix.
                explorer = self.server.snapshots.explorer(fields["step"])
            switches = fields.get("switches", [])
            what_if = explorer.what_if(layer, head, switches, fields.get("neuron"))
            if path == "/api/steps":
                asked = fields.get("extras", ()), fields.get("cell"), fields.get("neuron_cell")
                result = explorer.steps(prompt, layer, head, what_if, encoding, *asked)
            else:
                temperature = fields.get("temperature", 1.0)
                result = explorer.explain(prompt, temperature, what_if, encoding)
        except PromptError as e:
            self._send_error(HTTPStatus.BAD_REQUEST, str(e), e.message)
            return
        except ValueError as e:  # a snapshot step the run does not have
            self._send_error(HTTPStatus.BAD_REQUEST, str(e))
            return
        self._send_json(HTTPStatus.OK, result)

    def _answer_compare(self, fields: dict) -> None:
        """Answer /api/compare: the prompt through the served model and --compare's."""
        other = self.server.compare
        if other is None:
            self._send_error(
                HTTPStatus.NOT_FOUND,
                "this page has no second model: serve it with --compare OTHER_RUN",
            )
            return
        try:
            prompt, encoding = fields.get("prompt", ""), fields.get("encoding", "json")
            result = self.server.explorer.compare(other, prompt, encoding)
        except PromptError as e:
            self._send_error(HTTPStatus.BAD_REQUEST, str(e), e.message)
            return
        self._send_json(HTTPStatus.OK, result)

    def _send_error(self, status: HTTPStatus, text: str, message: Message | None = None) -> None:
        """``{"error": text}``, and the same as a catalogue ``message`` where there is one
        (the page shows that, in its language)."""
        payload = {"error": text}
        if message is not None:
            payload["message"] = message_json(message)
        self._send_json(status, payload)

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
    """A ThreadingHTTPServer holding the explorer, the rendered page and its scripts.

    Args:
        address: (host, port); port 0 picks any free port (see ``server_address``).
        explorer: the `AttentionExplorer` that answers /api/attention.
        first_prompt: a prompt the page shows on opening, or None (the page asks).
        lang: "en" or "ko" to open the page in; None follows the browser's language.
        snapshots: the run's `viz.snapshot_explorers.SnapshotExplorers`, or None: with
            them, GET /api/snapshots lists them and a request's ``step`` field answers
            from the snapshot nearest that step.
        compare: a second model (`viz.model_compare.ComparedModel`) for POST
            /api/compare and the page's side-by-side view, or None.

    Raises:
        OSError: if the address cannot be bound (port in use, unknown host), or the
            page template cannot be read.
        PromptError: if ``first_prompt`` cannot be shown.
    """

    daemon_threads = True  # Ctrl-C does not wait for a browser's open connection

    def __init__(
        self,
        address,
        explorer: AttentionExplorer,
        first_prompt: str | None = None,
        lang: str | None = None,
        snapshots=None,
        compare: ComparedModel | None = None,
    ):
        first = explorer.explain(first_prompt) if first_prompt is not None else None
        self.explorer = explorer
        self.snapshots = snapshots  # a viz.snapshot_explorers.SnapshotExplorers, or None
        self.compare = compare
        label = None if compare is None else compare.label
        page = render_page(explorer.model_info(), first, served=True, lang=lang, compare=label)
        self.page = page.encode("utf-8")
        template = PAGE_TEMPLATE.read_text(encoding="utf-8")
        self.scripts = {  # "/page/core.js" -> its bytes
            f"/page/{name}": text.encode("utf-8") for name, text in page_scripts(template).items()
        }
        super().__init__(address, ExplorerRequestHandler)

    @property
    def url(self) -> str:
        """The address to open, e.g. http://127.0.0.1:8000/."""
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"
