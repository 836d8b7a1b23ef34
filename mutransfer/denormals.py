"""Subnormal floats flushed to zero on CPU, in every trial and every coordinate-check run.

Why: many x86 CPUs compute with a subnormal operand or result (|x| < 1.2e-38 in float32)
through a slow microcode path. Training at a high LR produces such values: one width-256 sp
trial of the quickstart's model ran at about a third of the tokens/s at lr 2^-5 that it ran
at 2^-9 on the machine of issue 29 (1.12x slower at 2^-3 on an AMD EPYC, which pays less);
flushed, every LR runs alike (benchmarks/README.md, "Subnormal floats").

What it changes: a subnormal becomes 0 (flush-to-zero) and is read as 0 (denormals-are-zero).
Where none arises the losses are bit for bit the same; a high-LR trial is chaotic enough that
the change sends it down another path (its final loss moved by 0.02-0.18 nats in the
benchmark). `torch.set_flush_denormal` says whether the CPU allows it (x86 with SSE3; it
returns False elsewhere, and nothing changes).

Where it holds: the setting is a per-thread CPU register that a thread inherits when it is
created. A process that flushes before its first parallel op (a trial's worker, `mutransfer
train`) has every intra-op thread flushing; threads created before it keep subnormals. The
trials table's `env` column records what a probe at the trial's thread count finds
(`flush_denormal`, mutransfer/results/provenance.py), not what was asked.

In a process that goes on after the trial (a notebook calling `mutransfer.run_trial`,
mutransfer/commands/api.py), `denormals_flushed` sets the calling thread back afterwards: its later
arithmetic (numpy's, torch's on that thread) keeps its subnormals. Intra-op threads that torch
started during the trial keep flushing: torch offers no way to reach them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def flush_denormals() -> bool:
    """Flush subnormal floats to zero from here on; True where the platform allows it."""
    return bool(torch.set_flush_denormal(True))


def flushing_here() -> bool:
    """Whether this thread flushes subnormals now: a probe, as torch has no getter. One
    element: the product is computed on this thread, not torch's intra-op pool."""
    tiny = torch.tensor(1e-30, dtype=torch.float32) * 1e-10  # 1e-40: subnormal
    return bool(tiny == 0)


@contextmanager
def denormals_flushed() -> Iterator[bool]:
    """flush_denormals for the body (True where the platform allows it); on leaving, this
    thread flushes again only if it did before."""
    before = flushing_here()
    allowed = flush_denormals()
    try:
        yield allowed
    finally:
        if not before:
            torch.set_flush_denormal(False)
