"""This machine's memory, and the trials that cannot fit in it whatever else runs beside them.

A model too large for the machine was found only when it was built: after the smaller widths
had trained (their progress printed, their minutes spent), or never, where a deep model is
built block by block; a batch too large ended in numpy's MemoryError once the data had loaded.
The bounds here are the cost model's float32 weights, gradients and optimizer state
(mutransfer/cost/model.py), one batch's token ids, and what a training step holds at once for
sure: those weights with the activations autograd keeps for the backward (counted tensor by
tensor, within 1% of autograd's); a trial they refuse cannot fit on this machine. The
estimate's peak (its CPU RSS: the backward's temporaries, malloc's heap, the process's own
0.5 GB) is above these bounds by design: up to ~2x at a small width, so a trial under them may
still not fit (the cost table prints that peak)."""

from __future__ import annotations

import os
from typing import Any

from mutransfer.config import BUILTIN_ARCHS, TrialConfig
from mutransfer.cost.model import Estimate
from mutransfer.cost.table import estimate_config, regime_of


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


def step_floor_bytes(est: Estimate, steps: int) -> float:
    """What a training step holds at once whatever the allocator: at the forward's end, the
    weights and the saved activations and, from the second step on, the previous step's
    gradients (zeroed after the forward) and the optimizer state."""
    if steps >= 2:
        return est.weights_bytes + est.activation_bytes
    return max(est.weights_bytes, 4 * est.params + est.activation_bytes)


def step_beyond_memory(config: dict[str, Any], memory: float | None,
                       where: str = "this machine") -> str | None:
    """Why one training step of `config` cannot fit in `memory` bytes (step_floor_bytes);
    None where it may, for a user factory's model, or for a trial on a GPU (its activations
    are the GPU's: check_fit's)."""
    if memory is None or config.get("model", {}).get("arch", "mamba") not in BUILTIN_ARCHS \
            or regime_of(config) != "cpu":
        return None
    est = estimate_config(config, "cpu")
    steps = TrialConfig.model_validate(config).train.total_steps
    need = step_floor_bytes(est, steps)
    if need <= memory:
        return None
    train = config.get("train", {})
    return (f"one training step does not fit in memory: the weights, gradients, optimizer "
            f"state and the activations kept for the backward take {need / 1e9:,.1f} GB "
            f"(estimated peak {est.peak_bytes / 1e9:,.1f} GB), {where} has "
            f"{memory / 1e9:,.1f} GB; lower train.batch_size ({train.get('batch_size')}) or "
            f"train.seq_len ({train.get('seq_len')})")


def trial_beyond_memory(config: dict[str, Any], memory: float | None,
                        where: str = "this machine") -> str | None:
    """Why the trial `config` (a dict as TrialConfig dumps it) cannot fit in `memory` bytes
    (of `where`): its model (beyond_memory), else one batch of its train section, else one
    training step (step_beyond_memory)."""
    train = config.get("train", {})
    return beyond_memory(config, memory, where) or batch_beyond_memory(
        int(train.get("batch_size", 1)), int(train.get("seq_len", 1)),
        ("train.batch_size", "train.seq_len"), memory, where) or step_beyond_memory(
        config, memory, where)
