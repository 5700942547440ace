"""The cached token file is closed deterministically, not by the garbage collector.

Each run left three ``unclosed file ... tokens.bin`` ResourceWarnings (the batch
sampler's and the two evaluation samples' readers), and an exception kept alive held
their file descriptors (on Windows, locked files). The readers now open the file for
each batch and close it at once; only the splits' memory maps hold it while the run's
objects live.
"""

import gc
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from data.batches import BatchSampler, EvaluationWindows
from data.corpus import prepare_corpus
from tests.conftest import tiny_overrides
from training import load_config, train
from training.loop import Trainer

QUIET = {
    "train.max_iters": 2,
    "train.eval_interval": 2,
    "train.sample_tokens": 0,
    "train.attention_prompt": "",
    "train.final_full_eval": False,
}


def _descriptors_on(path_part: str) -> list[str]:
    """What this process's open file descriptors point at, where under path_part."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if path_part in target:
            held.append(target)
    return held


def test_a_run_leaves_no_unclosed_token_file(tmp_path, shakespeare_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        train(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **QUIET)))
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []


def test_readers_hold_no_file_between_batches(tmp_path, shakespeare_path):
    corpus = prepare_corpus(path=str(shakespeare_path), cache_dir=str(tmp_path / "cache"))
    assert isinstance(corpus.train_ids, np.memmap)
    before = len(_descriptors_on(str(tmp_path)))  # the maps'
    sampler = BatchSampler(corpus.train_ids, 16, 4, 0, "cpu")
    windows = EvaluationWindows(corpus.val_ids, 16, 256)
    x, _ = sampler.next_batch()
    next(windows.batches(8))
    assert x.shape == (4, 16) and len(_descriptors_on(str(tmp_path))) == before


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_failed_run_kept_alive_by_its_exception_holds_only_the_maps(tmp_path, shakespeare_path):
    trainer = Trainer(load_config(None, tiny_overrides(tmp_path, shakespeare_path, **QUIET)))

    def fail(step):
        raise RuntimeError("planted")

    trainer.train_step = fail
    try:
        trainer.run()
    except RuntimeError as e:
        kept = e  # its traceback holds the trainer, its corpus and readers
    del trainer
    held = _descriptors_on(str(tmp_path / "cache"))
    # The training and validation splits' memory maps (each keeps a descriptor);
    # before, the sampler's and the two evaluation samples' readers added three.
    assert len(held) == 2 and all(p.endswith("tokens.bin") for p in held)
    del kept
