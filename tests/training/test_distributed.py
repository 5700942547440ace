"""Data-parallel training launched through torchrun: 2 processes on CPU (gloo, whatever
MINIGPT_TEST_DEVICE says: one GPU cannot hold two NCCL ranks), and a job of one process
on TEST_DEVICE (NCCL on CUDA: what a one-GPU machine can check)."""

import pytest
import torch

import sample as sample_script
import train as train_script
from model import GPT, GPTConfig
from model.checkpoint import load_checkpoint
from tests.conftest import ON_CUDA, ROOT, read_scalars, tiny_overrides, torchrun
from tests.training.conftest import SHARES_DDP_JOB
from training import load_config, train
from training.config import TrainConfig
from training.optim import build_optimizer
from viz.run_events import TRAIN_LOSS

pytestmark = pytest.mark.slow  # torchrun and DDP jobs


@SHARES_DDP_JOB
def test_gradients_are_averaged_across_ranks(ddp_job):
    rank0 = torch.load(ddp_job / "grads" / "rank0.pt", weights_only=True)
    rank1 = torch.load(ddp_job / "grads" / "rank1.pt", weights_only=True)
    assert not torch.equal(rank0["x"], rank1["x"])  # each rank drew its own batch
    for name in rank0["after"]:
        assert torch.equal(rank0["after"][name], rank1["after"][name]), name

    # One single-process step on the union of both batches must give the same weights.
    cfg = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "dropout": 0.0}
    model = GPT(GPTConfig(vocab_size=65, **cfg))
    model.load_state_dict(rank0["initial"])
    optimizer = build_optimizer(model, TrainConfig(learning_rate=rank0["lr"]), "cpu")
    for group in optimizer.param_groups:
        group["lr"] = rank0["lr"]
    x = torch.cat([rank0["x"], rank1["x"]])
    y = torch.cat([rank0["y"], rank1["y"]])
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    for name, value in model.state_dict().items():
        torch.testing.assert_close(rank0["after"][name], value, atol=1e-6, rtol=1e-5)

    # Without averaging, a rank's step on its own batch alone would differ.
    alone = GPT(GPTConfig(vocab_size=65, **cfg))
    alone.load_state_dict(rank0["initial"])
    opt_alone = build_optimizer(alone, TrainConfig(learning_rate=rank0["lr"]), "cpu")
    for group in opt_alone.param_groups:
        group["lr"] = rank0["lr"]
    alone(rank0["x"], rank0["y"])[1].backward()
    torch.nn.utils.clip_grad_norm_(alone.parameters(), 1.0)
    opt_alone.step()
    diff = alone.blocks[0].attn.qkv_proj.weight - rank0["after"]["blocks.0.attn.qkv_proj.weight"]
    assert diff.abs().max() > 1e-6


def test_torchrun_end_to_end_then_single_process(tmp_path, shakespeare_path, capsys):
    overrides = tiny_overrides(tmp_path, shakespeare_path, device="cpu", **{"train.max_iters": 4})
    out = tmp_path / "run"
    r = torchrun("train.py", *overrides, retry_gloo_abort=True, run_folder=out)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "global batch 8 x 1 accumulation x 2 ranks" in r.stdout
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("events")).__len__() == 1
    ckpt = load_checkpoint(out / "ckpt.pt")
    assert ckpt["iter_num"] == 4 and ckpt["rng"]["world_size"] == 2
    assert len(ckpt["rng"]["ranks"]) == 2

    # Resume under DDP with the same world size continues.
    resumed = tiny_overrides(
        tmp_path, shakespeare_path, device="cpu", **{"train.max_iters": 6, "train.resume": True}
    )
    r = torchrun("train.py", *resumed, retry_gloo_abort=True, run_folder=out)
    assert r.returncode == 0, r.stderr[-3000:]
    assert load_checkpoint(out / "ckpt.pt")["iter_num"] == 6

    # A single process samples from it, and refuses an inexact resume with a clear
    # message (in this process: what is checked is the run folder, not the launch).
    argv = ["--out-dir", str(out), "--max-new-tokens", "10", "--device", "cpu"]
    assert sample_script.main([*argv, "--prompt", "KING"]) == 0
    assert capsys.readouterr().out.startswith("KING")
    more = {"train.max_iters": 8, "train.resume": True}
    single = [str(o) for o in tiny_overrides(tmp_path, shakespeare_path, device="cpu", **more)]
    assert train_script.main(single) == 2
    err = capsys.readouterr().err
    assert "written by 2 process(es)" in err and "--nproc_per_node=2" in err


def test_failure_on_one_rank_ends_the_job(tmp_path, shakespeare_path):
    r = torchrun(ROOT / "tests" / "ddp_worker.py", tmp_path, shakespeare_path, "fail")
    assert r.returncode != 0, r.stdout[-2000:]
    assert "rank 1 failed on purpose" in r.stderr + r.stdout, r.stderr[-3000:]
    assert not (tmp_path / "rank0.pt").exists()  # rank 0 did not carry on alone


def test_one_process_job_runs_in_a_process_group_with_a_plain_runs_losses(
    tmp_path, shakespeare_path
):
    """torchrun --nproc_per_node=1 joins a process group of one (NCCL on CUDA, gloo on
    CPU) and sends DDP's gradients and the loop's collectives through it; the losses are
    those of `python train.py`, and a plain process resumes its checkpoint."""
    backend = "nccl" if ON_CUDA else "gloo"
    job = tiny_overrides(tmp_path / "job", shakespeare_path, **{"train.max_iters": 4})
    r = torchrun("train.py", *job, nproc=1)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f" x 1 process ({backend} process group)" in r.stdout, r.stdout[-2000:]
    ckpt = load_checkpoint(tmp_path / "job" / "run" / "ckpt.pt")
    assert ckpt["iter_num"] == 4 and ckpt["rng"]["world_size"] == 1

    plain = train(
        load_config(
            None, tiny_overrides(tmp_path / "plain", shakespeare_path, **{"train.max_iters": 4})
        )
    )
    job_losses = read_scalars(tmp_path / "job" / "run")[TRAIN_LOSS]
    assert [step for step, _ in job_losses] == [1, 2, 3, 4]
    # TensorBoard stores float32: compare the plain run's losses at that precision.
    expected = [float(torch.tensor(plain.losses[s], dtype=torch.float32)) for s in (1, 2, 3, 4)]
    assert [loss for _, loss in job_losses] == expected

    resumed = tiny_overrides(
        tmp_path / "job", shakespeare_path, **{"train.max_iters": 6, "train.resume": True}
    )
    assert train(load_config(None, resumed)).iter_num == 6
