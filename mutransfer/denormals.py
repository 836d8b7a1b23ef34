"""Subnormal floats flushed to zero on CPU, in every trial and every coordinate-check run.

Why: an x86 CPU computes with a subnormal operand or result (|x| < 1.2e-38 in float32) in
microcode, many times slower than a normal float. Training at a high LR fills Adam's
second-moment estimates and the SSM's decaying state with such values: one width-256 sp
trial of the quickstart's model ran at about a third of the tokens/s at lr 2^-5 that it ran
at 2^-9 (issue 29; benchmarks/README.md, "Subnormal floats"). Flushed, both run alike.

What it changes: a subnormal becomes 0 (flush-to-zero) and is read as 0 (denormals-are-zero).
Those values are below 1.2e-38 of a loss of order 1, so the losses stay the same or move in
their last bits (measured: benchmarks/README.md). PyTorch's own benchmarks and many training
setups run this way; `torch.set_flush_denormal` is where it says whether the CPU allows it
(x86 with SSE3; it returns False elsewhere, and nothing changes).

Where it holds: the setting is a per-thread CPU register that a thread inherits when it is
created. A process that flushes before its first parallel op (a trial's worker, `mutransfer
train`) has every intra-op thread flushing; threads created before it keep subnormals. The
trials table's `env` column records what a probe at the trial's thread count finds
(`flush_denormal`, mutransfer/results/provenance.py), not what was asked.
"""

from __future__ import annotations

import torch


def flush_denormals() -> bool:
    """Flush subnormal floats to zero from here on; True where the platform allows it."""
    return bool(torch.set_flush_denormal(True))
