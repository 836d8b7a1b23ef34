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

from numbers import Integral

import torch
import torch.nn.functional as F

from mutransfer.errors import UserError
from mutransfer.ops.common import check_real_floats
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


def _autocast_on(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: no device argument
        return (torch.is_autocast_cpu_enabled() if device_type == "cpu"
                else torch.is_autocast_enabled())


def ssd_core(X, a, B, C, backend: str = "chunked", chunk_size: int = 64):
    """The SSD of discretised inputs by one of the pure-PyTorch backends. The log decays `a`
    and their sums stay in float32 at least (X may be bf16 under autocast), as the reference
    keeps dA_cumsum in float32; y comes back in X's dtype. Outside autocast, bf16 X, B and C
    are computed in a's dtype (the products of float32 decays with bf16 operands would mix
    dtypes in one matmul, which torch refuses); under autocast the matmuls cast as it says."""
    a = a.to(torch.promote_types(a.dtype, X.dtype))
    if not _autocast_on(X.device.type):
        X, B, C, dtype = X.to(a.dtype), B.to(a.dtype), C.to(a.dtype), X.dtype
    else:
        dtype = X.dtype
    if backend == "chunked":
        return ssd_chunked(X, a, B, C, chunk_size).to(dtype)
    if backend == "reference":
        return ssd_sequential(X, a, B, C).to(dtype)
    if backend == "quadratic":
        return ssd_quadratic(X, a, B, C).to(dtype)
    raise UserError(f"unknown SSD backend {backend!r}; known: {', '.join(SSD_BACKENDS)}")


def check_ssd_shapes(x, dt, A, B, C, D=None, dt_bias=None, chunk_size: int = 64) -> None:
    """The shapes of `ssd_scan`'s arguments (mamba_chunk_scan_combined's), exactly: a
    ValueError rather than a broadcast (a (batch, L, 1) dt, an A or D of one element), a
    different grouping of C than of B (repeated to the heads apart, which the pure-PyTorch
    references accepted), a cast (a complex A, an integer x) or a crash deep inside."""
    if x.dim() != 4 or x.shape[1] < 1:
        raise ValueError(f"x must be (batch, L, heads, headdim) with L >= 1, got "
                         f"{tuple(x.shape)}")
    batch, L, heads, _ = x.shape
    if tuple(dt.shape) != (batch, L, heads):
        raise ValueError(f"dt must be (batch, L, heads) = {(batch, L, heads)}, got "
                         f"{tuple(dt.shape)}")
    for name, t in (("A", A), ("D", D), ("dt_bias", dt_bias)):
        if t is not None and tuple(t.shape) != (heads,):
            raise ValueError(f"{name} must be (heads,) = ({heads},), got {tuple(t.shape)}")
    if B.dim() != 4 or tuple(B.shape[:2]) != (batch, L) or C.shape != B.shape:
        raise ValueError(f"B and C must be (batch, L, groups, d_state) alike with (batch, L) ="
                         f" {(batch, L)}, got {tuple(B.shape)} and {tuple(C.shape)}")
    if B.shape[2] < 1 or heads % B.shape[2]:  # no groups: heads % 0 raised ZeroDivisionError
        raise ValueError(f"{B.shape[2]} groups do not divide {heads} heads")
    check_real_floats(x=x, dt=dt, A=A, B=B, C=C, D=D, dt_bias=dt_bias)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, Integral) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")


def ssd_scan(x, dt, A, B, C, D=None, dt_bias=None, dt_softplus=True, chunk_size: int = 64,
             backend: str | None = None) -> torch.Tensor:
    """y (batch, L, heads, headdim); `backend=None`: chunked. Shapes are checked
    (`check_ssd_shapes`) for every backend."""
    backend = backend or "chunked"
    check_ssd_shapes(x, dt, A, B, C, D, dt_bias, chunk_size)
    if backend == "mamba_ssm":
        return ssd_mamba_ssm(x, dt, A, B, C, D=D, dt_bias=dt_bias, dt_softplus=dt_softplus,
                             chunk_size=chunk_size)
    X, a, _ = discretize(x, dt, A, dt_bias, dt_softplus)
    y = ssd_core(X, a, B, C, backend, chunk_size)
    return y if D is None else y + x * D[:, None].to(x.dtype)
