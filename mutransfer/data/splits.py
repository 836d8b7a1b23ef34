"""Train/eval assignment by stable hashes: the same on every machine and Python version.

A unit (a file, or a row of a Parquet shard) goes to eval when its hash, read as a number in
[0, 1), is below eval_fraction. Python's `hash()` is salted per process, so blake2b names the
key and splitmix64 mixes in row indices (vectorized, no Python loop per row).
"""

from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def key_hash(key: str, split_seed: int) -> int:
    """64-bit hash of a name (a relative path), salted by the split seed."""
    digest = hashlib.blake2b(f"{split_seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 values (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def to_unit(h: np.ndarray) -> np.ndarray:
    """uint64 hashes as floats in [0, 1) (top 53 bits)."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def key_score(key: str, split_seed: int) -> float:
    return float(to_unit(np.array([key_hash(key, split_seed)], dtype=np.uint64))[0])


def rows_in_eval(key: str, split_seed: int, first_row: int, n_rows: int,
                 eval_fraction: float) -> np.ndarray:
    """Boolean mask: which of rows first_row..first_row+n_rows-1 of shard `key` are eval."""
    rows = np.arange(first_row, first_row + n_rows, dtype=np.uint64)
    h = mix64(np.uint64(key_hash(key, split_seed)) ^ mix64(rows))
    return to_unit(h) < eval_fraction


def split_keys(keys: list[str], split_seed: int, eval_fraction: float) -> list[bool]:
    """Eval flags for files; both sides get at least one file when there are two or more
    (the lowest-scoring file goes to eval, the highest to train), so small folders still split."""
    scores = [key_score(k, split_seed) for k in keys]
    flags = [s < eval_fraction for s in scores]
    if len(keys) >= 2 and not any(flags):
        flags[int(np.argmin(scores))] = True
    if len(keys) >= 2 and all(flags):
        flags[int(np.argmax(scores))] = False
    return flags
