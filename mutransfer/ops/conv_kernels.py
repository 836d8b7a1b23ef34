"""Triton kernels of Mamba's causal depthwise conv + SiLU in the (batch, L, channels) layout.

Imported only through `mutransfer.ops.causal_conv`. out[t, d] = SiLU(bias[d] +
sum_k w[d, k] x[t - (K-1) + k, d]) with x zero before t = 0, as `conv1d(padding=K-1)[..., :L]`.
Tiles are (BLOCK_T, BLOCK_D) with channels contiguous; x is read through its strides (the
x half of in_proj's output, a view), out and dx are written contiguous (batch, L, channels).
Backward: one kernel recomputes the pre-activation, writes dL/dpre and adds dw and dbias
(one atomic add per program and weight), a second correlates dL/dpre with w into dx.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile(ptr, t, d, st, sd, L, d_mask):
    """x[t, d] in float32, zero for t outside [0, L)."""
    m = ((t >= 0) & (t < L))[:, None] & d_mask[None, :]
    return tl.load(ptr + t[:, None] * st + d[None, :] * sd, mask=m, other=0.0).to(tl.float32)


@triton.jit
def _block(L, dim, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.program_id(2) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_mask = d < dim
    return b, t, d, d_mask, (t < L)[:, None] & d_mask[None, :]


@triton.jit
def _preactivation(x_b, w_ptr, bias_ptr, t, d, x_st, x_sd, L, d_mask, K: tl.constexpr,
                   BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """bias + sum_k w[:, k] x[t - (K-1) + k]: the conv before SiLU, float32."""
    acc = tl.zeros((BLOCK_T, BLOCK_D), tl.float32) + \
        tl.load(bias_ptr + d, mask=d_mask, other=0.0).to(tl.float32)[None, :]
    for k in tl.static_range(K):
        w = tl.load(w_ptr + d * K + k, mask=d_mask, other=0.0).to(tl.float32)
        acc += w[None, :] * _tile(x_b, t - (K - 1) + k, d, x_st, x_sd, L, d_mask)
    return acc


@triton.jit
def conv_silu_fwd_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, x_sb, x_st, x_sd, L, dim,
                         K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    b, t, d, d_mask, mask = _block(L, dim, BLOCK_T, BLOCK_D)
    pre = _preactivation(x_ptr + b * x_sb, w_ptr, bias_ptr, t, d, x_st, x_sd, L, d_mask, K,
                         BLOCK_T, BLOCK_D)
    out = pre * tl.sigmoid(pre)
    tl.store(out_ptr + b * L * dim + t[:, None] * dim + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def conv_silu_bwd_pre_kernel(x_ptr, w_ptr, bias_ptr, g_ptr, dpre_ptr, dw_ptr, dbias_ptr,
                             x_sb, x_st, x_sd, g_sb, g_st, g_sd, L, dim, K: tl.constexpr,
                             BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """dpre = dL/d(pre-activation) (batch, L, dim); dw (dim, K) and dbias (dim,) float32."""
    b, t, d, d_mask, mask = _block(L, dim, BLOCK_T, BLOCK_D)
    x_b = x_ptr + b * x_sb
    pre = _preactivation(x_b, w_ptr, bias_ptr, t, d, x_st, x_sd, L, d_mask, K, BLOCK_T,
                         BLOCK_D)
    sig = tl.sigmoid(pre)
    g = tl.load(g_ptr + b * g_sb + t[:, None] * g_st + d[None, :] * g_sd, mask=mask,
                other=0.0).to(tl.float32)
    dpre = tl.where(mask, g * sig * (1.0 + pre * (1.0 - sig)), 0.0)
    tl.store(dpre_ptr + b * L * dim + t[:, None] * dim + d[None, :],
             dpre.to(dpre_ptr.dtype.element_ty), mask=mask)
    tl.atomic_add(dbias_ptr + d, tl.sum(dpre, axis=0), mask=d_mask, sem="relaxed")
    for k in tl.static_range(K):
        x = _tile(x_b, t - (K - 1) + k, d, x_st, x_sd, L, d_mask)
        tl.atomic_add(dw_ptr + d * K + k, tl.sum(dpre * x, axis=0), mask=d_mask,
                      sem="relaxed")


@triton.jit
def conv_bwd_dx_kernel(dpre_ptr, w_ptr, dx_ptr, L, dim, K: tl.constexpr,
                       BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """dx[t] = sum_k w[k] dpre[t + (K-1) - k], written contiguous (batch, L, dim)."""
    b, t, d, d_mask, mask = _block(L, dim, BLOCK_T, BLOCK_D)
    base = dpre_ptr + b * L * dim
    dx = tl.zeros((BLOCK_T, BLOCK_D), tl.float32)
    for k in tl.static_range(K):
        w = tl.load(w_ptr + d * K + k, mask=d_mask, other=0.0).to(tl.float32)
        dx += w[None, :] * _tile(base, t + (K - 1) - k, d, dim, 1, L, d_mask)
    tl.store(dx_ptr + b * L * dim + t[:, None] * dim + d[None, :],
             dx.to(dx_ptr.dtype.element_ty), mask=mask)
