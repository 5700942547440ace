"""Choosing the device (model/device.py, training/distributed.py): a CPU run asks
nothing of CUDA; device=cuda without CUDA is one line."""

import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_overrides
from training import ConfigError, load_config, train


def test_cpu_run_never_queries_cuda(tmp_path, shakespeare_path, monkeypatch):
    """The project's code asks nothing of CUDA on a device=cpu run. PyTorch's own code
    may (torch 2.11's Adam.step calls torch.cuda.is_available()): it gets the answer."""

    def project_must_not_call(name):
        real = getattr(torch.cuda, name)

        def guarded(*args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if Path(caller).resolve().is_relative_to(Path(torch.__file__).parent):
                return real(*args, **kwargs)
            raise AssertionError(f"torch.cuda.{name} was called from {caller} on a device=cpu run")

        monkeypatch.setattr(torch.cuda, name, guarded)

    for name in ("is_available", "is_bf16_supported", "get_rng_state_all"):
        project_must_not_call(name)
    result = train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, device="cpu")))
    assert result.iter_num == 6


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_device_cuda_without_cuda_is_one_clear_line(tmp_path, shakespeare_path):
    cfg = load_config(None, tiny_overrides(tmp_path, shakespeare_path, device="cuda"))
    with pytest.raises(ConfigError, match="device cuda is not available here; use cpu or auto"):
        train(cfg)
