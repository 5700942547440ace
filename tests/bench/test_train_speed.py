"""bench/train_speed.py's choices and table (its timings are not tested: speed is
measured on a quiet machine, docs/benchmarks.md): shapes and dtypes named on the
command line, the median of alternated rounds, the speed against float32."""

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import train_speed  # noqa: E402


def test_shapes_by_name_list_and_group():
    assert train_speed.shape_names(["nanogpt-cpu,cpu-recipe", "nanogpt-cpu"]) == [
        "nanogpt-cpu",
        "cpu-recipe",
    ]
    assert train_speed.shape_names(["shipped-cpu"]) == [
        "nanogpt-cpu",
        "cpu-recipe",
        "cpu-gpt2",
        "gpu-recipe-b8",
    ]
    assert train_speed.shape_names(["shipped-gpu"]) == ["gpu-recipe", "gpu-modern"]
    with pytest.raises(ValueError, match="--shape cpu-recip: unknown; use nanogpt-cpu"):
        train_speed.shape_names(["cpu-recip"])


def test_dtypes_as_a_list():
    assert train_speed.dtype_names(["float32,bfloat16", "float16", "float32"]) == [
        "float32",
        "bfloat16",
        "float16",
    ]
    assert train_speed.dtype_names([]) == []
    with pytest.raises(ValueError, match="--dtype fp16: unknown; use auto, float32"):
        train_speed.dtype_names(["fp16"])


def row(ms: float, dtype: str) -> dict:
    """What a case's process reports, for a shape of 1,000 tokens a step."""
    return {
        "name": "cpu-recipe",
        "device": "cpu",
        "shape": "4L 4H 128C T128 B16",
        "dtype": dtype,
        "peak_dtype": dtype,
        "ms_per_iter": ms,
        "tokens_per_iter": 1000,
        "flops_per_token": 5e6,
        "peak_gflops": 100.0,
        "peak_mb": 280.0,
    }


def test_the_table_gives_the_median_round_and_the_speed_against_float32():
    results = {
        ("cpu-recipe", "float32"): [row(120, "float32"), row(100, "float32"), row(110, "float32")],
        ("cpu-recipe", "bfloat16"): [row(50, "bfloat16"), row(60, "bfloat16"), row(55, "bfloat16")],
    }
    header, _, float32, bfloat16 = train_speed.table(results)
    cells = [c.strip() for c in header.strip("|").split("|")]
    by_name = [
        dict(zip(cells, [c.strip() for c in r.strip("|").split("|")], strict=True))
        for r in (float32, bfloat16)
    ]
    assert (
        by_name[0]["ms/iter"] == "110.0" and by_name[0]["rounds ms/iter"] == "120.0 / 100.0 / 110.0"
    )
    assert by_name[0]["vs float32"] == "1.00x" and by_name[1]["vs float32"] == "2.00x"
    assert by_name[1]["tokens/s"] == "18,182"  # 1,000 tokens in 55 ms
    assert by_name[1]["MFU"] == "91%"  # 5 MFLOP x 18,182 tokens/s over 100 GFLOP/s
