"""Where a run trains, as far as its numbers depend on it: recorded in each checkpoint
and compared on resume.

A resumed run repeats an uninterrupted run's losses bit for bit only in the same
environment: the same torch (kernels and their reduction order change between
releases), the same kind of device (CPU and GPU round differently; a GPU model's
kernels differ from another's), and on CPU the same number of threads (a reduction
keeps one partial sum per thread and adds them in thread order, so another count
adds in another order; see `training.loop`). None of these is a config key, so a
resume on another machine or after an upgrade used to go on without a word. The
checkpoint's ``environment`` entry:

    torch     torch.__version__, e.g. "2.13.0+cpu"
    device    "cpu", or the accelerator's kind and name, e.g. "cuda: NVIDIA H200"
    threads   torch.get_num_threads() (compared on CPU only)

A checkpoint written before this entry existed resumes without the comparison.
"""

import torch

ENVIRONMENT_KEY = "environment"  # the checkpoint's entry


def environment_record(device: torch.device) -> dict:
    """The checkpoint's ``environment`` entry for a run on ``device`` (see the module
    docstring)."""
    name = device.type
    if device.type == "cuda":
        name = f"cuda: {torch.cuda.get_device_name(device)}"
    # str(): torch.__version__ is a str subclass, which weights_only loading refuses.
    return {"torch": str(torch.__version__), "device": name, "threads": torch.get_num_threads()}


def environment_changes(saved: dict | None, current: dict) -> list[str]:
    """'what: then -> now' for each part of the environment that differs between a
    checkpoint's record (``saved``; None for a checkpoint without one: nothing to
    compare) and the resumed run's (``current``); the thread count only where both
    train on CPU."""
    if not saved:
        return []
    changes = []
    for key, what in (("torch", "torch"), ("device", "device")):
        if key in saved and saved[key] != current[key]:
            changes.append(f"{what} {saved[key]} -> {current[key]}")
    on_cpu = saved.get("device") == current["device"] == "cpu"
    if on_cpu and "threads" in saved and saved["threads"] != current["threads"]:
        changes.append(f"CPU threads {saved['threads']} -> {current['threads']}")
    return changes


def environment_note(saved: dict | None, current: dict) -> str:
    """What a resumed run says when its environment differs from its checkpoint's
    (`environment_changes`), or ""."""
    changes = environment_changes(saved, current)
    if not changes:
        return ""
    return (
        "note: resuming in another environment (" + "; ".join(changes) + "): training "
        "goes on, but its losses will not repeat an uninterrupted run's bit for bit"
    )
