"""λ_max of the uncentred autocorrelation matrix R = E[x xᵀ] of length-L sequences, and
the timescale rule Δ* = κ / √(L · λ_max(R)) (Liu & Li, ICLR 2025).

λ_max is found by power iteration on a matrix-vector product, never forming R:
- sample:   R̂ v = Xᵀ(X v)/n, X (n, L) the sequences as rows. Exact for the sample, but with
            n < L sequences its λ_max is biased upwards (about (1 + √(L/n))² for white noise).
- toeplitz: the stationary estimate R̂ = mean_p(m_p²) 11ᵀ + Toeplitz(ĉ), m_p the mean of
            process p's entries and ĉ(k) = Σ_p Σ_i Σ_t (x_{p,i,t} - m_p)(x_{p,i,t+k} - m_p)
            / (P n L) the autocovariance (the biased estimator: positive semi-definite, a Gram
            matrix of zero-padded shifts), applied by an FFT of length 2L. Consistent from a
            few long sequences. The means are kept apart because the biased ĉ would shrink
            them into a triangle (λ_max ≈ 0.68 L instead of L for a constant sequence). For
            correlations not much shorter than L, ĉ(k) is shrunk by (L-k)/L and λ_max comes
            out low (AR(1) ρ = 0.9: 59 instead of 72 at L = 32, 95 instead of 99 at L = 256).

Processes: x (n, L) is n sequences of one process (P = 1); x (..., n, L) is n sequences of
each of the P processes its leading dims index, each with its own mean, pooled (R is then the
mixture's, the average of theirs). A layer's SSM input is one process per channel (models/
data_init.py): the channels' means differ, and one mean over all of them put their spread into
ĉ, shrunk into a triangle as above (λ_max about 0.72 of the pooled rows' on the models' inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import torch

MatVec = Callable[[torch.Tensor], torch.Tensor]
ESTIMATORS = ("toeplitz", "sample")


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """Sequences (n, L) in float64: (L,) -> (1, L); (..., L) kept as rows."""
    x = x.detach().to(torch.float64)
    return x.reshape(-1, x.shape[-1])


def sample_operator(x: torch.Tensor) -> MatVec:
    """v -> Xᵀ(X v)/n for the rows of x."""
    rows = as_rows(x)
    n = rows.shape[0]
    return lambda v: rows.T @ (rows @ v) / n


# Rows FFT'd at once by the `toeplitz` estimate: the model's SSM input holds (sample sequences x
# channels) rows, 131,072 of length 2048 at width 4096, whose float64 copy and spectra at once
# took ~13 GiB; a block of this many entries takes ~130 MiB, and the sums are over rows, so
# blocks change nothing but the order of a float64 sum (inputs of one block: nothing at all).
BLOCK_ENTRIES = 1 << 22


def row_blocks(x: torch.Tensor) -> Iterator[torch.Tensor]:
    """The rows of x (..., L) in float64, a block of about BLOCK_ENTRIES entries at a time
    (one block for a 1-d x)."""
    rows = x.detach().reshape(-1, x.shape[-1])
    step = max(1, BLOCK_ENTRIES // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        yield rows[start:start + step].to(torch.float64)


def autocorrelation(x: torch.Tensor, mean: float | torch.Tensor = 0.0) -> torch.Tensor:
    """r̂(k), k = 0..L-1: Σ_i Σ_t y_{i,t} y_{i,t+k} / (n L), y = x - mean, by FFT (the biased
    estimator), a block of rows at a time. `mean`: one number, or one per row of x."""
    n, length = math.prod(x.shape[:-1]), x.shape[-1]
    means = torch.as_tensor(mean, dtype=torch.float64).reshape(-1, 1)
    power, start = None, 0
    for block in row_blocks(x):
        rows = means if means.shape[0] == 1 else means[start:start + block.shape[0]]
        start += block.shape[0]
        spec = torch.fft.rfft(block - rows, n=2 * length)
        part = (spec * spec.conj()).sum(0)
        power = part if power is None else power + part
    if power is None:  # no rows: no estimate
        return torch.full((length,), math.nan, dtype=torch.float64)
    r = torch.fft.irfft(power, n=2 * length)[:length]
    return r / (n * length)


def toeplitz_operator(r: torch.Tensor) -> MatVec:
    """v -> T v with T_st = r(|s - t|), by embedding T in a circulant of size 2L."""
    length = r.shape[0]
    circ = torch.cat([r, r.new_zeros(1), r[1:].flip(0)])
    spec = torch.fft.rfft(circ)
    return lambda v: torch.fft.irfft(spec * torch.fft.rfft(v, n=2 * length), n=2 * length)[
        :length]


def process_means(x: torch.Tensor) -> torch.Tensor:
    """The mean of each process's entries (module docstring: (n, L) one process, (..., n, L)
    one per index of the leading dims) in float64, (P,), summed a block of rows at a time;
    NaN where a process has no entries."""
    processes = math.prod(x.shape[:-2]) if x.dim() > 2 else 1
    sums = [b.sum(dim=1) for b in row_blocks(x)]
    if not sums or x.numel() == 0:
        return torch.full((processes,), math.nan, dtype=torch.float64)
    per_row = torch.cat(sums).reshape(processes, -1)
    return per_row.sum(dim=1) / (per_row.shape[1] * x.shape[-1])


def stationary_operator(x: torch.Tensor) -> MatVec:
    """v -> mean_p(m_p²) 1(1ᵀv) + Toeplitz(ĉ) v: the `toeplitz` estimate of R (module
    docstring), each process's sequences centred on their own mean m_p."""
    means = process_means(x)
    rows_each = x.shape[-2] if x.dim() > 1 else 1
    cov = toeplitz_operator(autocorrelation(x, means.repeat_interleave(rows_each)))
    square = (means * means).mean()
    return lambda v: square * v.sum() + cov(v)


def power_iteration(matvec: MatVec, dim: int, *, iters: int = 1000, tol: float = 1e-7,
                    seed: int = 0) -> float:
    """Largest eigenvalue of a symmetric PSD operator (Rayleigh quotient of the iterate)."""
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(dim, generator=gen, dtype=torch.float64)
    v = v / v.norm()
    lam = 0.0
    for _ in range(iters):
        w = matvec(v)
        new = float(v @ w)
        norm = w.norm()
        if norm == 0:
            return 0.0
        v = w / norm
        if abs(new - lam) <= tol * abs(new):
            return new
        lam = new
    return lam


def lambda_max(x: torch.Tensor, estimator: str = "toeplitz", *, iters: int = 1000) -> float:
    """λ_max of the autocorrelation matrix of the sequences x: (n, L), or (..., n, L) for
    several processes (module docstring); the `sample` estimate pools all rows either way."""
    length = x.shape[-1]
    if estimator == "sample":
        op = sample_operator(x)
    elif estimator == "toeplitz":
        op = stationary_operator(x)
    else:
        raise ValueError(f"unknown estimator {estimator!r}; choose from {ESTIMATORS}")
    return power_iteration(op, length, iters=iters)


def timescale(lam: float, length: int, kappa: float = 1.0) -> float:
    """Δ* = κ / √(L · λ_max); keeps an SSM's output O(1) when Re(A) = 0. Zero input
    (λ_max 0, or a rounding error below it) bounds no Δ: inf, not a made-up large number."""
    if lam > 0 or math.isnan(lam):
        return kappa / math.sqrt(length * lam)
    return math.inf


def spread_dt(dt_star: float, spread: float, count: int,
              generator: torch.Generator | None = None) -> torch.Tensor:
    """`count` values log-uniform in [Δ*/√spread, Δ*·√spread]."""
    u = torch.rand(count, generator=generator, dtype=torch.float64) - 0.5
    return (dt_star * spread ** u).float()


def fit_exponent(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx = torch.log(torch.tensor(xs, dtype=torch.float64))
    ly = torch.log(torch.tensor(ys, dtype=torch.float64))
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx * lx).sum())
