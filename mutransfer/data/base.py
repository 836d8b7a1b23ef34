"""What every data source provides: a DataSpec and an iterator of (inputs, targets) batches."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

Split = Literal["train", "eval"]
SPLITS: tuple[Split, ...] = ("train", "eval")
# Targets equal to this are not scored (torch's cross_entropy default ignore_index).
IGNORE_INDEX = -100


@dataclass(frozen=True)
class DataSpec:
    """The shapes and loss a model needs for a source.

    kind "tokens": inputs are int64 (B, L) token ids below vocab_size; "real": float32
    (B, L, input_dim). Targets: int64 (B, L) class ids below output_dim for loss "ce", where
    IGNORE_INDEX (-100) marks positions that are not scored (the copy task scores only its
    answer); float32 (B, L, output_dim) for loss "mse". For language modelling the targets are the
    inputs shifted by one token and output_dim == vocab_size.

    memory_kernel: the task's own memory function, seq_len -> rho(0..K), for a task that is
    defined by one (the synthetic memory task; None for the others). The model reads it from
    here for `model.imag_init.memory: task`, so that models/ never imports data/.
    """

    kind: Literal["tokens", "real"]
    vocab_size: int | None
    input_dim: int | None
    output_dim: int
    loss: Literal["ce", "mse"]
    memory_kernel: Callable[[int], np.ndarray] | None = field(default=None, compare=False)


Batch = tuple["torch.Tensor", "torch.Tensor"]


class DataSource(Protocol):
    spec: DataSpec
    description: str  # one line for progress output: source, size, tokens

    def batches(self, split: Split, batch_size: int, seq_len: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
        """Infinite, deterministic given (config, split, seed); `start` skips that many batches
        so that a resumed iterator yields exactly the batches an uninterrupted one would."""
        ...


def check_batch_args(split: str, batch_size: int, seq_len: int, start: int) -> None:
    """Programming errors of the caller, not user input: plain ValueError."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if batch_size < 1 or seq_len < 1 or start < 0:
        raise ValueError(f"need batch_size >= 1, seq_len >= 1, start >= 0; got "
                         f"{batch_size}, {seq_len}, {start}")


def rng_for(seed: int, split: Split, *index: int) -> np.random.Generator:
    """A generator for one (seed, split, index...) cell, so any batch can be drawn directly."""
    words = [seed % 2**64, SPLITS.index(split), *(i % 2**64 for i in index)]
    return np.random.default_rng(words)


T = TypeVar("T")


def indexed_stream(make: Callable[[np.random.Generator], T], seed: int, split: Split,
                   start: int) -> Iterator[T]:
    """make(rng_for(seed, split, i)) for i = start, start + 1, ... without end: item i depends
    on its index only, so starting at `start` costs nothing."""
    for index in itertools.count(start):
        yield make(rng_for(seed, split, index))
