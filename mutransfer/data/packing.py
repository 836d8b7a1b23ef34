"""Packing a token stream into shuffled batches, resumable at any batch without replaying.

Sequence j of a stream is its tokens [j*L, j*L + L] (L + 1 tokens; neighbours share one token,
so every token is a target exactly once, as in nanoGPT's loaders). The sequences are cut into
chunks of C (about 2^20 tokens, a multiple of the batch size); within chunk c they are served in
an order drawn from (seed, split, c), so that a batch mixes documents from across the chunk
instead of B consecutive pieces of one. Batch `start` lies in chunk start // (C/B): the stream is
opened at that chunk's first token and nothing before it is packed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from mutransfer.data.base import Batch, Split, rng_for
from mutransfer.data.memory import lm_batch

SHUFFLE_TOKENS = 1 << 20


def chunk_sequences(batch_size: int, seq_len: int) -> int:
    """Sequences per shuffle chunk: a multiple of batch_size, about SHUFFLE_TOKENS tokens."""
    return batch_size * max(1, SHUFFLE_TOKENS // (batch_size * seq_len))


class _Taker:
    """Reads exact token counts from an iterator of arrays of any lengths."""

    def __init__(self, parts: Iterator[np.ndarray]):
        self.parts = parts
        self.pending: list[np.ndarray] = []
        self.have = 0

    def take(self, n: int) -> np.ndarray:
        while self.have < n:
            part = next(self.parts)
            self.pending.append(part)
            self.have += len(part)
        joined = np.concatenate(self.pending) if len(self.pending) > 1 else self.pending[0]
        rest = joined[n:]
        self.pending, self.have = ([rest] if len(rest) else []), len(rest)
        return joined[:n]


def packed_batches(read_from: Callable[[int], Iterator[np.ndarray]], split: Split,
                   batch_size: int, seq_len: int, seed: int, start: int) -> Iterator[Batch]:
    """`read_from(pos)` yields the infinite token stream of the split from token `pos` on."""
    per_chunk = chunk_sequences(batch_size, seq_len) // batch_size  # batches per chunk
    n_seq = per_chunk * batch_size
    chunk, skip = divmod(start, per_chunk)
    taker = _Taker(read_from(chunk * n_seq * seq_len))
    block = taker.take(n_seq * seq_len + 1)
    while True:
        seqs = np.lib.stride_tricks.sliding_window_view(block, seq_len + 1)[::seq_len]
        order = rng_for(seed, split, chunk).permutation(n_seq)
        for k in range(skip, per_chunk):
            yield lm_batch(seqs[order[k * batch_size:(k + 1) * batch_size]])
        skip, chunk = 0, chunk + 1
        block = np.concatenate([block[-1:], taker.take(n_seq * seq_len)])
