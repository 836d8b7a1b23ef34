"""Reference input sequences for the timescale rule: white noise, AR(1), a constant mean."""

from __future__ import annotations

import math

import torch

from mutransfer.ops.fft_conv import fft_conv

KINDS = ("white", "ar1", "constant")


def white(n: int, length: int, gen: torch.Generator | None = None) -> torch.Tensor:
    """(n, length) i.i.d. N(0, 1): R = I, λ_max = 1 at every L."""
    return torch.randn(n, length, generator=gen, dtype=torch.float64)


def ar1(n: int, length: int, rho: float, gen: torch.Generator | None = None) -> torch.Tensor:
    """(n, length) stationary AR(1), x_t = rho x_{t-1} + e_t, e_t ~ N(0, 1).

    Exact: x_t = Σ_{s<=t} rho^{t-s} e_s + rho^{t+1} x_{-1} with x_{-1} drawn from the stationary
    law N(0, 1/(1 - rho²)); the sum is a causal convolution, done by FFT.
    """
    e = torch.randn(n, length, generator=gen, dtype=torch.float64)
    start = torch.randn(n, 1, generator=gen, dtype=torch.float64) / math.sqrt(1 - rho * rho)
    powers = rho ** torch.arange(length, dtype=torch.float64)
    return fft_conv(e, powers) + start * rho * powers


def constant(n: int, length: int, mean: float = 1.0, noise: float = 0.0,
             gen: torch.Generator | None = None) -> torch.Tensor:
    """(n, length) mean + noise · N(0, 1): λ_max ≈ mean² L + noise² grows like L."""
    return mean + noise * torch.randn(n, length, generator=gen, dtype=torch.float64)


def make(kind: str, n: int, length: int, *, rho: float = 0.99, mean: float = 1.0,
         noise: float = 0.0, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if kind == "white":
        return white(n, length, gen)
    if kind == "ar1":
        return ar1(n, length, rho, gen)
    if kind == "constant":
        return constant(n, length, mean, noise, gen)
    raise ValueError(f"unknown signal {kind!r}; choose from {KINDS}")
