"""train.dtype (training/precision.py, model/device.py), sample.py --dtype and
evaluate.py --dtype: every dtype trains on CPU; auto on CPU is float32 with no autocast,
bit for bit; float16's loss scaling skips and counts overflowed steps, clips the
unscaled gradients and resumes exactly, alone, compiled and under DDP; a dtype the
device cannot compute in is refused before any work; old checkpoints still load,
sample, evaluate and resume."""

import math

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata

import evaluate
import model.device
import sample
import training.precision
from model.checkpoint import load_checkpoint, save_checkpoint
from model.device import DtypeError, resolve_dtype
from tests.conftest import ROOT, read_scalars, shakespeare, tiny_overrides
from tests.training.conftest import SHARES_DDP_JOB
from training import ConfigError, load_config, train
from training.distributed import DistContext
from training.loop import Trainer
from training.precision import SCALER_KEY, SKIPPED_KEY, resolve_precision
from viz.run_events import TRAIN_SKIPPED_STEPS

STEPS = 12
# A loss scale far above what the tiny model's float16 gradients can carry: its first
# steps overflow, are skipped, and halve the scale until it fits.
PLANTED_SCALE = 2.0**20


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


def eval_losses(result) -> list[tuple]:
    return [(e["iter"], e["train_loss"], e["val_loss"]) for e in result.evals]


@pytest.fixture
def planted_overflow(monkeypatch):
    """float16 runs start from PLANTED_SCALE instead of 2**16."""
    monkeypatch.setattr(training.precision, "INITIAL_LOSS_SCALE", PLANTED_SCALE)


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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_each_dtype_trains_on_cpu_and_the_loss_falls(dtype, tmp_path, capsys, linear_output_dtypes):
    result = run(tmp_path, **{"train.dtype": dtype})
    out = capsys.readouterr().out
    scaled = dtype == "float16"
    assert f"training on cpu, dtype {dtype}{', loss scaling' if scaled else ''}: " in out
    # float16 runs on a CPU, but most CPUs emulate it: the run says so before it starts.
    assert ("note: train.dtype=float16 on a CPU: most CPUs" in out) == scaled
    assert result.losses[STEPS] < result.losses[3] - 0.1
    assert result.evals[1]["val_loss"] < result.evals[0]["val_loss"]
    # The matrix products ran in the chosen dtype (training, evaluation and sample).
    assert linear_output_dtypes == {getattr(torch, dtype)}
    assert result.skipped_steps == (0 if scaled else None)
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    # The weights and the optimizer state stay float32 whatever the dtype.
    assert {v.dtype for v in ckpt["model"].values()} == {torch.float32}
    moments = [s["exp_avg"] for s in ckpt["optimizer"]["state"].values()]
    assert {m.dtype for m in moments} == {torch.float32}
    assert ckpt["config"]["train"]["dtype"] == dtype
    assert (SCALER_KEY in ckpt) == scaled


def test_auto_on_cpu_is_float32_without_autocast_bit_for_bit(tmp_path, monkeypatch, capsys):
    explicit = run(tmp_path / "float32", **{"train.dtype": "float32"})

    def no_autocast(*args, **kwargs):
        raise AssertionError("a CPU run with train.dtype=auto entered torch.autocast")

    monkeypatch.setattr(torch, "autocast", no_autocast)
    capsys.readouterr()
    auto = run(tmp_path / "auto")  # train.dtype is auto by default
    assert "training on cpu, dtype float32 (auto: float32 on CPU): " in capsys.readouterr().out
    assert auto.losses == explicit.losses  # bitwise, at every logged step
    assert eval_losses(auto) == eval_losses(explicit)
    assert auto.full_val_loss == explicit.full_val_loss
    folder = tmp_path / "auto" / "run"
    # The key as given in config.yaml; resolved in the checkpoint and the HParams table.
    given = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    assert given["train"]["dtype"] == "auto"
    ckpt = load_checkpoint(folder / "ckpt.pt")
    assert ckpt["config"]["train"]["dtype"] == "float32"
    assert SCALER_KEY not in ckpt and SKIPPED_KEY not in ckpt
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)[metadata.SESSION_START_INFO_TAG]
    hparams = metadata.parse_session_start_info_plugin_data(content).hparams
    assert hparams["train.dtype"].string_value == "float32"
    assert TRAIN_SKIPPED_STEPS not in read_scalars(folder)


def test_float16_overflow_is_skipped_and_counted_not_fatal(tmp_path, planted_overflow, capsys):
    result = run(tmp_path, **{"train.dtype": "float16"})
    out = capsys.readouterr().out
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    skipped = result.skipped_steps
    assert skipped >= 1
    # Each skipped step halved the scale, and no other step changed it.
    assert ckpt[SCALER_KEY]["scale"] == PLANTED_SCALE / 2**skipped
    assert ckpt[SKIPPED_KEY] == skipped
    # Logged every 3 steps, as the run's total so far; the first overflows come at once.
    logged = read_scalars(tmp_path / "run")[TRAIN_SKIPPED_STEPS]
    assert [step for step, _ in logged] == [3, 6, 9, 12]
    counts = [int(count) for _, count in logged]
    assert 1 <= counts[0] and counts == sorted(counts) and counts[-1] == skipped
    assert f"| skipped {counts[0]} |" in out  # the first progress line
    # Not the NaN failure: the run went on, and learned.
    assert result.iter_num == STEPS and math.isfinite(result.full_val_loss)
    assert result.losses[STEPS] < result.losses[3] - 0.1


def test_float16_clips_and_logs_the_unscaled_gradient_norm(tmp_path):
    """The first step's gradient norm in float16 (its loss scaled by 2**16) is the
    float32 one, within float16's rounding: the gradients are unscaled first."""
    norms = {}
    for dtype in ("float32", "float16"):
        cfg = load_config(None, overrides(tmp_path / dtype, **{"train.dtype": dtype}))
        trainer = Trainer(cfg)  # the same seed: the same weights and batch
        _, grad_norm, _ = trainer.train_step(0)
        norms[dtype] = float(grad_norm)
        trainer.close(started=False)
    assert norms["float16"] == pytest.approx(norms["float32"], rel=1e-2)


def test_float16_resume_matches_an_uninterrupted_run(tmp_path, planted_overflow, capsys):
    """Stopped at step 6, after the planted overflows lowered the loss scale: the
    resumed run goes on from the saved scale (one from 2**20 again would skip more)."""
    whole = run(tmp_path / "whole", **{"train.dtype": "float16"})
    first = run(tmp_path / "split", **{"train.dtype": "float16", "train.max_iters": 6})
    capsys.readouterr()
    second = run(
        tmp_path / "split",
        **{"train.dtype": "float16", "train.max_iters": STEPS, "train.resume": True},
    )
    assert "train.dtype:" not in capsys.readouterr().out  # unchanged: no change to note
    assert {**first.losses, **second.losses} == whole.losses  # bitwise
    assert eval_losses(first) + eval_losses(second) == eval_losses(whole)
    assert second.skipped_steps == whole.skipped_steps >= 1
    saved = [load_checkpoint(tmp_path / name / "run" / "ckpt.pt") for name in ("whole", "split")]
    assert saved[0][SCALER_KEY] == saved[1][SCALER_KEY]


def test_a_resume_in_another_dtype_says_so_and_goes_on(tmp_path, planted_overflow, capsys):
    run(tmp_path, **{"train.dtype": "float16", "train.max_iters": 6})
    capsys.readouterr()
    result = run(
        tmp_path, **{"train.dtype": "bfloat16", "train.max_iters": 9, "train.resume": True}
    )
    assert "train.dtype: float16 -> bfloat16 (the steps from here on" in capsys.readouterr().out
    assert result.iter_num == 9 and result.skipped_steps is None
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert ckpt["config"]["train"]["dtype"] == "bfloat16" and SCALER_KEY not in ckpt


def test_an_old_checkpoint_loads_samples_evaluates_and_resumes(tmp_path, capsys):
    """A checkpoint written before train.dtype: no dtype in its config, no scaler."""
    first = run(tmp_path, **{"train.max_iters": 6})
    path = tmp_path / "run" / "ckpt.pt"
    ckpt = load_checkpoint(path)
    del ckpt["config"]["train"]["dtype"]
    save_checkpoint(ckpt, path)
    score = evaluate.score_split(str(tmp_path / "run"), device_name="cpu")
    assert score.loss == first.full_val_loss  # auto on CPU: the run's float32 number
    assert sample.main(["--out-dir", str(tmp_path / "run"), "--device", "cpu"]) == 0
    capsys.readouterr()
    resumed = run(tmp_path, **{"train.resume": True})
    out = capsys.readouterr().out
    assert "train.dtype" not in out  # it ran in float32 on CPU, as auto does now
    assert resumed.iter_num == STEPS


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


def test_evaluate_says_when_it_scores_in_another_dtype_than_the_run(tmp_path, capsys):
    """A bfloat16 CPU run (the bfloat16 CPU recipe) scored with --dtype auto, float32
    on a CPU: not the run's own number, and the output says which flag gives it."""
    trained = run(tmp_path, **{"train.dtype": "bfloat16", "train.max_iters": 6})
    args = ["--out-dir", str(tmp_path / "run"), "--device", "cpu"]
    capsys.readouterr()
    assert evaluate.main(args) == 0
    out = capsys.readouterr().out
    assert (
        "note: the run trained in bfloat16 and this score is in float32 (--dtype auto): "
        "--dtype bfloat16 computes as the run did"
    ) in out
    assert evaluate.main([*args, "--dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out and f"{trained.full_val_loss:.4f} nats/char" in out


def test_auto_and_the_refusals_by_device(monkeypatch):
    """What each device is given, with the capability checks planted (no GPU here)."""
    cuda, mps, cpu = torch.device("cuda"), torch.device("mps"), torch.device("cpu")
    monkeypatch.setattr(model.device, "cuda_has_bfloat16", lambda: False)
    auto = resolve_precision("auto", cuda)
    assert auto.dtype == torch.float16 and auto.loss_scaling
    assert auto.describe() == "dtype float16 (auto: this GPU has no bfloat16), loss scaling"
    assert resolve_precision("float16", cuda).describe() == "dtype float16, loss scaling"
    with pytest.raises(ConfigError) as refused:
        resolve_precision("bfloat16", cuda)
    assert str(refused.value).startswith(
        "train.dtype=bfloat16 cannot run on cuda: this GPU has no bfloat16 arithmetic"
    )
    assert "use float16 (training adds loss scaling), float32 or auto" in str(refused.value)
    with pytest.raises(DtypeError, match="^--dtype=bfloat16 cannot run on cuda"):
        resolve_dtype("bfloat16", cuda)
    monkeypatch.setattr(model.device, "cuda_has_bfloat16", lambda: True)
    auto = resolve_precision("auto", cuda)
    assert auto.describe() == "dtype bfloat16 (auto: this GPU has bfloat16)"
    assert not auto.loss_scaling and resolve_precision("bfloat16", cuda).dtype == torch.bfloat16
    assert resolve_precision("auto", mps).describe() == "dtype float32 (auto: float32 on MPS)"
    monkeypatch.setattr(model.device, "mps_has_bfloat16", lambda: False)
    with pytest.raises(ConfigError, match="bfloat16 on MPS needs macOS 14 or later"):
        resolve_precision("bfloat16", mps)
    assert resolve_precision("float16", mps).loss_scaling
    for name in ("float32", "bfloat16", "float16"):  # a CPU computes in each
        assert resolve_precision(name, cpu).dtype == getattr(torch, name)


def test_a_dtype_the_device_cannot_run_is_refused_before_any_work(tmp_path, monkeypatch):
    """bfloat16 on a CUDA GPU without it (planted: this machine has no GPU)."""
    monkeypatch.setattr(model.device, "cuda_has_bfloat16", lambda: False)
    on_a_gpu = lambda device_name: (DistContext(), torch.device("cuda"))  # noqa: E731
    monkeypatch.setattr("training.loop.init_distributed", on_a_gpu)
    cfg = load_config(None, overrides(tmp_path, **{"train.dtype": "bfloat16"}))
    with pytest.raises(ConfigError, match="^train.dtype=bfloat16 cannot run on cuda: this GPU"):
        train(cfg)
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def test_float16_with_muon_accumulation_and_averaging(tmp_path, planted_overflow):
    """The CPU recipe's set-up (Muon, weight averaging), two micro-batches a step, eager:
    loss scaling happens outside the compiled model, and building float16 CPU kernels
    (no user's path: the start note says a CPU emulates float16) made this the suite's
    slowest test. Compiled runs are test_compiling.py's."""
    cfg = load_config(
        ROOT / "configs/shakespeare_char_cpu.yaml",
        overrides(
            tmp_path,
            **{
                "train.compile": False,
                "train.dtype": "float16",
                "train.gradient_accumulation_steps": 2,
                "train.ema_start": 0,
                "train.sample_tokens": 0,
            },
        ),
    )
    result = train(cfg)
    ckpt = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert result.skipped_steps >= 1
    assert ckpt[SCALER_KEY]["scale"] == PLANTED_SCALE / 2**result.skipped_steps
    assert result.losses[STEPS] < result.losses[3] - 0.1


@SHARES_DDP_JOB
def test_float16_under_two_process_ddp_skips_the_same_steps(ddp_job):
    ranks = [
        torch.load(ddp_job / "float16" / f"float16_{rank}.pt", weights_only=True) for rank in (0, 1)
    ]
    skipped = ranks[0]["skipped"]
    assert skipped >= 1 and ranks[1]["skipped"] == skipped
    for state in ranks:
        assert state["scale"] == PLANTED_SCALE / 2**skipped
    for name, weight in ranks[0]["weights"].items():  # DDP kept them equal
        assert torch.equal(weight, ranks[1]["weights"][name]), name
    assert ranks[0]["losses"] == ranks[1]["losses"]
