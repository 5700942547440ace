"""The precision of the forward passes (model/device.py): sample.py --dtype and
evaluate.py --dtype on CPU, and what each device may compute in."""

import pytest
import torch

import evaluate
import model.device
import sample
from conftest import shakespeare, tiny_overrides
from model.device import DtypeError, resolve_dtype
from training import load_config, train

STEPS = 12


def overrides(folder, **extra) -> list[str]:
    """A tiny CPU run of STEPS steps, evaluations at 6 and 12 on a short validation
    split, logs every 3 steps, a short TensorBoard sample (in the run's dtype)."""
    values = {
        "data.val_fraction": 0.01,
        "train.max_iters": STEPS,
        "train.lr_decay_iters": STEPS,
        "train.eval_interval": 6,
        "train.log_interval": 3,
        "train.sample_tokens": 8,
        "train.attention_prompt": "''",
        **extra,
    }
    return tiny_overrides(folder, shakespeare(), device="cpu", **values)


def run(folder, **extra):
    """Train a tiny run (see `overrides`); returns its TrainResult."""
    return train(load_config(None, overrides(folder, **extra)))


@pytest.fixture
def linear_output_dtypes():
    """The dtypes of every nn.Linear output while the test runs."""
    seen = set()

    def record(module, _inputs, output):
        if isinstance(module, torch.nn.Linear):
            seen.add(output.dtype)

    handle = torch.nn.modules.module.register_module_forward_hook(record)
    yield seen
    handle.remove()


def test_sample_and_evaluate_take_dtype(tmp_path, capsys, linear_output_dtypes):
    trained = run(tmp_path, **{"train.max_iters": 6})
    folder = str(tmp_path / "run")
    capsys.readouterr()
    texts = {}
    for dtype in (None, "float32", "bfloat16", "float16"):
        flags = [] if dtype is None else ["--dtype", dtype]
        args = ["--out-dir", folder, "--device", "cpu", "--prompt", "KING", "--seed", "7"]
        linear_output_dtypes.clear()
        assert sample.main([*args, "--max-new-tokens", "40", *flags]) == 0
        texts[dtype] = capsys.readouterr().out
        assert texts[dtype].startswith("KING") and len(texts[dtype]) == len("KING") + 40 + 1
        assert linear_output_dtypes == {getattr(torch, dtype or "float32")}  # the prefill
    assert texts["float32"] == texts[None]  # auto on CPU
    scores = {}
    for dtype in ("auto", "float32", "bfloat16", "float16"):
        scores[dtype] = evaluate.score_split(folder, device_name="cpu", dtype_name=dtype).loss
    assert scores["auto"] == scores["float32"] == trained.full_val_loss
    for dtype in ("bfloat16", "float16"):  # another rounding of the same model
        assert scores[dtype] != scores["float32"]
        assert scores[dtype] == pytest.approx(scores["float32"], abs=0.02)
    code = evaluate.main(["--out-dir", folder, "--device", "cpu", "--dtype", "bfloat16"])
    assert code == 0 and f"{scores['bfloat16']:.4f} nats/char" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse names the choices
        sample.main(["--out-dir", folder, "--dtype", "float64"])
    assert "invalid choice: 'float64'" in capsys.readouterr().err


def test_auto_and_the_refusals_by_device(monkeypatch):
    """What each device computes in, with the capability checks planted (no GPU here)."""
    cuda, mps, cpu = torch.device("cuda"), torch.device("mps"), torch.device("cpu")
    monkeypatch.setattr(model.device, "cuda_has_bfloat16", lambda: False)
    assert resolve_dtype("auto", cuda) == torch.float16
    with pytest.raises(DtypeError, match="^--dtype=bfloat16 cannot run on cuda: this GPU"):
        resolve_dtype("bfloat16", cuda)
    monkeypatch.setattr(model.device, "cuda_has_bfloat16", lambda: True)
    assert resolve_dtype("auto", cuda) == resolve_dtype("bfloat16", cuda) == torch.bfloat16
    assert resolve_dtype("auto", mps) == torch.float32
    monkeypatch.setattr(model.device, "mps_has_bfloat16", lambda: False)
    with pytest.raises(DtypeError, match="bfloat16 on MPS needs macOS 14 or later"):
        resolve_dtype("bfloat16", mps)
    for name in ("float32", "bfloat16", "float16"):  # a CPU computes in each
        assert resolve_dtype(name, cpu) == getattr(torch, name)
