"""A corpus held in memory (one token buffer per split), sampled as random windows.

Batch i of a split is drawn from its own generator seeded by (seed, split, i), so `start`
costs nothing and batches do not depend on how many were drawn before.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from mutransfer.data.base import Batch, DataSpec, Split, check_batch_args, indexed_stream
from mutransfer.errors import UserError


def lm_batch(block: np.ndarray) -> Batch:
    """(B, L+1) token ids -> inputs and next-token targets, int64, contiguous (each made by
    one widening copy of its slice)."""
    return (torch.from_numpy(block[:, :-1].astype(np.int64)),
            torch.from_numpy(block[:, 1:].astype(np.int64)))


class MemorySource:
    def __init__(self, name: str, train: np.ndarray, eval_: np.ndarray, vocab_size: int,
                 description: str):
        self.name = name
        self.buffers = {"train": train, "eval": eval_}
        self.spec = DataSpec(kind="tokens", vocab_size=vocab_size, input_dim=None,
                             output_dim=vocab_size, loss="ce")
        self.description = description

    def batches(self, split: Split, batch_size: int, seq_len: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
        check_batch_args(split, batch_size, seq_len, start)
        buf = self.buffers[split]
        if len(buf) < seq_len + 1:
            raise UserError(f"{self.name}: the {split} split has {len(buf)} tokens, fewer than "
                            f"seq_len + 1 = {seq_len + 1}")
        return self._windows(buf, split, batch_size, seq_len, seed, start)

    @staticmethod
    def _windows(buf: np.ndarray, split: Split, batch_size: int, seq_len: int, seed: int,
                 start: int) -> Iterator[Batch]:
        offsets = np.arange(seq_len + 1)
        n_starts = len(buf) - seq_len  # every window of seq_len + 1 tokens

        def window(rng: np.random.Generator) -> Batch:
            starts = rng.integers(0, n_starts, size=batch_size)
            return lm_batch(buf[starts[:, None] + offsets])

        return indexed_stream(window, seed, split, start)
