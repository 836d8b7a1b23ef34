"""This machine's memory, and the trials that cannot fit in it whatever else runs beside them.

A model too large for the machine was found only when it was built: after the smaller widths
had trained (their progress printed, their minutes spent), or never, where a deep model is
built block by block; a batch too large ended in numpy's MemoryError once the data had loaded.
The bounds here are the cost model's float32 weights, gradients and optimizer state
(mutransfer/cost/model.py), activations left out, and one batch's token ids: a trial they
refuse cannot fit on this machine."""

from __future__ import annotations

import os
from typing import Any

from mutransfer.config import BUILTIN_ARCHS
from mutransfer.cost.table import estimate_config


def memory_bytes() -> int | None:
    """This machine's physical memory (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def beyond_memory(config: dict[str, Any], memory: float | None,
                  where: str = "this machine") -> str | None:
    """Why the trial `config` (a dict as TrialConfig dumps it) cannot fit in `memory` bytes,
    in words ("its weights, ... take 320 GB, this machine has 25 GB"; `where` names what has
    the memory); None where it may, or where its model is a user factory (the cost model
    counts the built-in ones only)."""
    if memory is None or config.get("model", {}).get("arch", "mamba") not in BUILTIN_ARCHS:
        return None
    need = estimate_config(config, "cpu").weights_bytes
    if need <= memory:
        return None
    return (f"the model does not fit in memory: its weights, gradients and optimizer state "
            f"take {need / 1e9:,.0f} GB, {where} has {memory / 1e9:,.0f} GB")


def batch_beyond_memory(batch_size: int, seq_len: int, names: tuple[str, str],
                        memory: float | None, where: str = "this machine") -> str | None:
    """Why one batch cannot fit in `memory` bytes: its token ids alone, as the loader draws
    them (int64, batch_size x (seq_len + 1)), a bound from below on what a step holds
    (before, numpy's MemoryError traceback once the data had loaded); None where it may.
    `names`: how the command calls the batch size and the sequence length."""
    ids = 8 * batch_size * (seq_len + 1)
    if memory is None or ids <= memory:
        return None
    return (f"{names[0]} {batch_size} x {names[1]} {seq_len}: one batch's token ids alone "
            f"take {ids / 1e9:,.0f} GB, {where} has {memory / 1e9:,.0f} GB")


def trial_beyond_memory(config: dict[str, Any], memory: float | None,
                        where: str = "this machine") -> str | None:
    """Why the trial `config` (a dict as TrialConfig dumps it) cannot fit in `memory` bytes
    (of `where`): its model (beyond_memory), else one batch of its train section."""
    train = config.get("train", {})
    return beyond_memory(config, memory, where) or batch_beyond_memory(
        int(train.get("batch_size", 1)), int(train.get("seq_len", 1)),
        ("train.batch_size", "train.seq_len"), memory, where)
