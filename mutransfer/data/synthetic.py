"""Generated sequences for controlled studies: a linear memory task and a copying task.

Batch i of a split comes from its own generator seeded by (seed, split, i): train and eval
are different seed streams, and `start` costs nothing.

memory (real inputs, mse): x_t white Gaussian, y_t = sum_{k=0}^{K} rho(k) x_{t-k} with
x_t = 0 before the sequence starts, so every target is a function of the inputs the model
has seen (loss 0 is reachable; predicting 0 scores about sum_k rho(k)^2, i.e. 1 when
normalized). rho: exp(-k/tau), (k+1)^-power, or exp(-k/tau) cos(omega k), the exponential,
polynomial and oscillating memories of curse-of-memory studies of linear recurrences.
K = horizon, or seq_len - 1 by default.

copy (tokens, ce): symbols s_1..s_n drawn from n_symbols, then `lag` blanks, then a
delimiter; from the delimiter on the model must emit s_1..s_n (inputs there are blanks, no
teacher forcing). Targets are IGNORE_INDEX (-100) everywhere else. Vocab: symbols
0..n_symbols-1, blank n_symbols, delimiter n_symbols + 1. lag defaults to filling the sequence
(seq_len - 2 n), so the answer ends at the last position.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np
import torch

from mutransfer.data.base import (
    IGNORE_INDEX,
    Batch,
    DataSpec,
    Split,
    check_batch_args,
    indexed_stream,
)
from mutransfer.data.config import DataConfig
from mutransfer.errors import UserError


def memory_kernel(cfg: DataConfig, seq_len: int) -> np.ndarray:
    """rho(0..K) in float64, normalized to unit sum of squares when cfg.normalize."""
    horizon = seq_len - 1 if cfg.horizon is None else cfg.horizon
    k = np.arange(horizon + 1, dtype=np.float64)
    if cfg.rho == "exp":
        rho = np.exp(-k / cfg.tau)
    elif cfg.rho == "poly":
        rho = (k + 1.0) ** -cfg.power
    else:
        rho = np.exp(-k / cfg.tau) * np.cos(cfg.omega * k)
    if cfg.normalize:
        rho = rho / np.sqrt(np.sum(rho**2))
    return rho


def causal_conv(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """y[:, t] = sum_{k <= min(K, t)} kernel[k] x[:, t - k], by FFT (O(L log L))."""
    length = x.shape[-1]
    kernel = kernel[:length]  # lags past the sequence meet only the zero padding
    n = 1 << (length + len(kernel) - 2).bit_length()  # >= full linear convolution length
    spectrum = np.fft.rfft(x, n) * np.fft.rfft(kernel, n)
    return np.fft.irfft(spectrum, n)[..., :length]


def _real(a: np.ndarray) -> torch.Tensor:
    """(B, L) float64 -> (B, L, 1) float32."""
    return torch.from_numpy(a.astype(np.float32)).unsqueeze(-1)


class _Generated:
    spec: DataSpec
    description: str

    def check(self, seq_len: int) -> None:
        """UserError when seq_len does not fit the task."""

    def make(self, rng: np.random.Generator, batch_size: int, seq_len: int) -> Batch:
        raise NotImplementedError

    def batches(self, split: Split, batch_size: int, seq_len: int, seed: int,
                start: int = 0) -> Iterator[Batch]:
        check_batch_args(split, batch_size, seq_len, start)
        self.check(seq_len)
        return indexed_stream(lambda rng: self.make(rng, batch_size, seq_len), seed, split, start)


class MemoryTask(_Generated):
    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        self.spec = DataSpec(kind="real", vocab_size=None, input_dim=1, output_dim=1, loss="mse",
                             memory_kernel=partial(memory_kernel, cfg))
        shape = {"exp": f"tau {cfg.tau:g}", "poly": f"power {cfg.power:g}",
                 "osc": f"tau {cfg.tau:g}, omega {cfg.omega:g}"}[cfg.rho]
        horizon = "seq_len - 1" if cfg.horizon is None else str(cfg.horizon)
        self.description = (f"synthetic memory: rho {cfg.rho} ({shape}), horizon {horizon}"
                            f"{', normalized' if cfg.normalize else ''}; real inputs, mse")

    def make(self, rng: np.random.Generator, batch_size: int, seq_len: int) -> Batch:
        x = rng.standard_normal((batch_size, seq_len))
        y = causal_conv(x, memory_kernel(self.cfg, seq_len))
        return _real(x), _real(y)


class CopyTask(_Generated):
    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        self.blank, self.delimiter = cfg.n_symbols, cfg.n_symbols + 1
        vocab = cfg.n_symbols + 2
        self.spec = DataSpec(kind="tokens", vocab_size=vocab, input_dim=None, output_dim=vocab,
                             loss="ce")
        lag = "filling seq_len" if cfg.lag is None else str(cfg.lag)
        self.description = (f"synthetic copy: {cfg.copy_len} of {cfg.n_symbols} symbols, lag "
                            f"{lag}; tokens (vocab {vocab}), ce on the answer only")

    def lag(self, seq_len: int) -> int:
        return seq_len - 2 * self.cfg.copy_len if self.cfg.lag is None else self.cfg.lag

    def check(self, seq_len: int) -> None:
        need = 2 * self.cfg.copy_len + max(self.lag(seq_len), 0)
        if need > seq_len:
            raise UserError(f"synthetic copy needs seq_len >= 2 * copy_len + lag = {need}, "
                            f"got seq_len {seq_len}")

    def make(self, rng: np.random.Generator, batch_size: int, seq_len: int) -> Batch:
        n, delim_at = self.cfg.copy_len, self.cfg.copy_len + self.lag(seq_len)
        symbols = rng.integers(0, self.cfg.n_symbols, size=(batch_size, n))
        inputs = np.full((batch_size, seq_len), self.blank, dtype=np.int64)
        inputs[:, :n] = symbols
        inputs[:, delim_at] = self.delimiter
        targets = np.full((batch_size, seq_len), IGNORE_INDEX, dtype=np.int64)
        targets[:, delim_at:delim_at + n] = symbols
        return torch.from_numpy(inputs), torch.from_numpy(targets)


def load_synthetic(cfg: DataConfig) -> MemoryTask | CopyTask:
    return MemoryTask(cfg) if cfg.task == "memory" else CopyTask(cfg)
