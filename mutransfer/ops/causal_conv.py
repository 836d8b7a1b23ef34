"""Mamba's causal depthwise conv + SiLU on (batch, L, channels) activations.

`causal_conv1d_silu(x, weight, bias)` takes x (batch, L, dim) in any strides (the x half of
in_proj's output) and returns SiLU(conv1d(x, padding=K-1)[..., :L]) as a contiguous
(batch, L, dim) tensor, the layout x_proj and the scan read. On CUDA with triton it runs the
kernels of `conv_kernels` (one pass forward, two backward, no layout copy); elsewhere
PyTorch's conv1d, which works channels-first: a copy of the output to (batch, L, dim) (and,
on CUDA, of its strided input inside cudnn).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from mutransfer.ops.backends import triton_problem

BLOCK_T, BLOCK_D, WARPS = 32, 64, 4  # (steps, channels) per program; not tuned on a GPU


def _kernels() -> ModuleType | None:
    """The triton kernels module, or None without a triton that compiles them (the scan's
    floor, backends.TRITON_MIN: triton 2.3 rejects their tl.arange)."""
    if triton_problem():
        return None
    return importlib.import_module("mutransfer.ops.conv_kernels")


def _grid(batch: int, L: int, dim: int) -> tuple[int, int, int]:
    return (batch, -(-L // BLOCK_T), -(-dim // BLOCK_D))


class CausalConvSiLU(torch.autograd.Function):
    """Triton forward and backward; saves x (a view, not a copy), weight and bias."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        kernels = _kernels()
        batch, L, dim = x.shape
        w = weight.reshape(dim, -1).contiguous()
        out = torch.empty(batch, L, dim, device=x.device, dtype=x.dtype)
        kernels.conv_silu_fwd_kernel[_grid(batch, L, dim)](
            x, w, bias, out, x.stride(0), x.stride(1), x.stride(2), L, dim, K=w.shape[1],
            BLOCK_T=BLOCK_T, BLOCK_D=BLOCK_D, num_warps=WARPS)
        ctx.save_for_backward(x, w, bias)
        ctx.weight_shape = weight.shape
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        kernels = _kernels()
        x, w, bias = ctx.saved_tensors
        batch, L, dim = x.shape
        grid = _grid(batch, L, dim)
        dpre = torch.empty(batch, L, dim, device=x.device, dtype=x.dtype)
        dw = torch.zeros(w.shape, device=x.device, dtype=torch.float32)
        dbias = torch.zeros(dim, device=x.device, dtype=torch.float32)
        kernels.conv_silu_bwd_pre_kernel[grid](
            x, w, bias, g, dpre, dw, dbias, x.stride(0), x.stride(1), x.stride(2),
            g.stride(0), g.stride(1), g.stride(2), L, dim, K=w.shape[1], BLOCK_T=BLOCK_T,
            BLOCK_D=BLOCK_D, num_warps=WARPS)
        dx = torch.empty(batch, L, dim, device=x.device, dtype=x.dtype)
        kernels.conv_bwd_dx_kernel[grid](dpre, w, dx, L, dim, K=w.shape[1], BLOCK_T=BLOCK_T,
                                         BLOCK_D=BLOCK_D, num_warps=WARPS)
        return dx, dw.reshape(ctx.weight_shape).to(w.dtype), dbias.to(bias.dtype)


def causal_conv1d_silu_torch(x: torch.Tensor, weight: torch.Tensor,
                             bias: torch.Tensor) -> torch.Tensor:
    """The same with PyTorch's conv1d (channels-first, then one copy to (batch, L, dim))."""
    L = x.shape[1]
    y = F.conv1d(x.transpose(1, 2), weight, bias, padding=weight.shape[-1] - 1,
                 groups=weight.shape[0])
    return F.silu(y[..., :L]).transpose(1, 2).contiguous()


def use_triton(x: torch.Tensor) -> bool:
    """The triton kernels for CUDA tensors when triton imports (tests run them on the CPU
    under the interpreter by asking for them)."""
    return x.is_cuda and _kernels() is not None


def causal_conv1d_silu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                       triton: bool | None = None) -> torch.Tensor:
    """SiLU(causal depthwise conv(x)) as a contiguous (batch, L, dim) tensor; x (batch, L,
    dim) in any strides, weight (dim, 1, K), bias (dim,). `triton`: None picks by device."""
    if triton if triton is not None else use_triton(x):
        return CausalConvSiLU.apply(x, weight, bias)
    return causal_conv1d_silu_torch(x, weight, bias)
