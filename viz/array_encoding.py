"""How the page's answers carry their tables: as nested JSON lists, or packed as float32
bytes (a typed array) that the browser reads without parsing a number at a time.

A T = block_size answer holds hundreds of thousands of numbers; as JSON text each
float32 value becomes a double's 17 digits, and writing that text is most of the
server's time (docs/benchmarks.md, bench/attention_page_speed.py). Packed, a value is
its 4 bytes, base64-encoded: exactly the float32 the model computed, −∞ (the mask)
included, in a quarter of the text.

    {"dtype": "float32", "shape": [4, 4, 128, 128], "data": "<base64>"}

little-endian, row-major (C order): in the browser
``new Float32Array(Uint8Array.from(atob(data), c => c.charCodeAt(0)).buffer)``.

    answer = encode_arrays({"weights": tensor, "next": [...]}, "float32")
"""

import base64
import math

import numpy as np
import torch

ENCODINGS = ("json", "float32")


def tensor_lists(values: torch.Tensor) -> list | float | None:
    """A tensor as nested lists of floats, -inf (the mask) as None."""
    values = values.detach().cpu()
    if values.is_floating_point():
        values = values.double() if values.dtype == torch.float64 else values.float()
    lists = values.tolist()
    if not values.is_floating_point() or bool(torch.isfinite(values).all()):
        return lists

    def clean(item):
        if isinstance(item, list):
            return [clean(x) for x in item]
        return item if math.isfinite(item) else None

    return clean(lists)


def packed(values: torch.Tensor) -> dict:
    """A tensor as ``{"dtype": "float32", "shape", "data"}``: its values rounded to
    float32 (the model's own dtype), little-endian, row-major, base64."""
    array = values.detach().cpu().float().contiguous().numpy().astype("<f4", copy=False)
    return {
        "dtype": "float32",
        "shape": list(array.shape),
        "data": base64.b64encode(array.tobytes()).decode("ascii"),
    }


def unpacked(value: dict) -> torch.Tensor:
    """The tensor a `packed` dict holds (for Python clients and tests)."""
    data = np.frombuffer(base64.b64decode(value["data"]), dtype="<f4")
    return torch.from_numpy(data.copy()).reshape(value["shape"])


def encode_arrays(answer, encoding: str = "json"):
    """``answer`` with every tensor in it (in dicts and lists, at any depth) replaced by
    nested lists (``"json"``, `tensor_lists`) or a packed dict (``"float32"``,
    `packed`); everything else as it is.

    Raises:
        ValueError: for an encoding outside ENCODINGS.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    encode = tensor_lists if encoding == "json" else packed

    def walk(item):
        if isinstance(item, torch.Tensor):
            return encode(item)
        if isinstance(item, dict):
            return {key: walk(value) for key, value in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(value) for value in item]
        return item

    return walk(answer)
