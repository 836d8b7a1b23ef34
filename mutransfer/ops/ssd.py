"""`ssd_scan`: Mamba-2's SSD layer with its Δ and D, backends chosen by name.

Arguments as state-spaces/mamba's `mamba_chunk_scan_combined`: x (batch, L, heads, headdim),
dt (batch, L, heads) before its bias, A (heads,) (negative), B and C (batch, L, groups,
d_state), D (heads,), dt_bias (heads,). Δ = softplus(dt + dt_bias) is taken in float32 at least (as
the reference does before its cumulative sums); y = SSD(x·Δ, A·Δ, B, C) + D·x.

Backends: `chunked` (ops/ssd_chunked.py, the default everywhere), `reference` (the sequential
recurrence), `quadratic` (the materialised L×L matrix; tests), `mamba_ssm` (optional, CUDA:
ops/ssd_mamba_ssm.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mutransfer.errors import UserError
from mutransfer.ops.ssd_chunked import ssd_chunked
from mutransfer.ops.ssd_mamba_ssm import ssd_mamba_ssm
from mutransfer.ops.ssd_reference import ssd_quadratic, ssd_sequential

SSD_BACKENDS = ("chunked", "reference", "quadratic", "mamba_ssm")


def discretize(x, dt, A, dt_bias=None, dt_softplus=True):
    """(X = x·Δ, a = A·Δ, Δ) with Δ = softplus(dt + dt_bias) in float32 at least (x's dtype
    for X)."""
    wide = torch.promote_types(dt.dtype, torch.float32)
    delta = dt.to(wide) if dt_bias is None else dt.to(wide) + dt_bias.to(wide)
    if dt_softplus:
        delta = F.softplus(delta)
    return x * delta[..., None].to(x.dtype), delta * A.to(wide), delta


def ssd_core(X, a, B, C, backend: str = "chunked", chunk_size: int = 64):
    """The SSD of discretised inputs by one of the pure-PyTorch backends. The log decays `a`
    and their sums stay in float32 at least (X may be bf16 under autocast), as the reference
    keeps dA_cumsum in float32; y comes back in X's dtype."""
    a = a.to(torch.promote_types(a.dtype, X.dtype))
    if backend == "chunked":
        return ssd_chunked(X, a, B, C, chunk_size).to(X.dtype)
    if backend == "reference":
        return ssd_sequential(X, a, B, C).to(X.dtype)
    if backend == "quadratic":
        return ssd_quadratic(X, a, B, C).to(X.dtype)
    raise UserError(f"unknown SSD backend {backend!r}; known: {', '.join(SSD_BACKENDS)}")


def ssd_scan(x, dt, A, B, C, D=None, dt_bias=None, dt_softplus=True, chunk_size: int = 64,
             backend: str | None = None) -> torch.Tensor:
    """y (batch, L, heads, headdim); `backend=None`: chunked."""
    backend = backend or "chunked"
    if backend == "mamba_ssm":
        return ssd_mamba_ssm(x, dt, A, B, C, D=D, dt_bias=dt_bias, dt_softplus=dt_softplus,
                             chunk_size=chunk_size)
    X, a, _ = discretize(x, dt, A, dt_bias, dt_softplus)
    y = ssd_core(X, a, B, C, backend, chunk_size)
    return y if D is None else y + x * D[:, None].to(x.dtype)
