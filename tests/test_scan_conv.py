"""Mamba's causal conv + SiLU in the (batch, L, channels) layout: the triton kernels (under
the interpreter on CPU) compute what PyTorch's conv1d computes, forward and gradients, from a
strided view and into contiguous (batch, L, channels)."""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are decorated
pytest.importorskip("triton")
from mutransfer.ops.backends import triton_problem  # noqa: E402

TRITON_PROBLEM = triton_problem()  # a triton too old for the kernels (torch < 2.8 pins one)
if TRITON_PROBLEM:
    pytest.skip(TRITON_PROBLEM, allow_module_level=True)

from mutransfer.ops import causal_conv  # noqa: E402
from mutransfer.ops.causal_conv import causal_conv1d_silu, causal_conv1d_silu_torch  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"


def inputs(batch, L, dim, K=4, dtype=torch.float32, seed=0):
    """x as the first half of a (batch, L, 2 dim) buffer, as in_proj's output gives it."""
    g = torch.Generator().manual_seed(seed)
    xz = torch.randn(batch, L, 2 * dim, generator=g).to(DEVICE, dtype)
    w = (torch.randn(dim, 1, K, generator=g) * 0.5).to(DEVICE)
    b = torch.randn(dim, generator=g).to(DEVICE)
    return xz[..., :dim].requires_grad_(False), w, b, torch.randn(batch, L, dim, generator=g)


def run(fn, x, w, b, dout):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    out = fn(x, w, b)
    return out, torch.autograd.grad(out, (x, w, b), dout.to(out.device, out.dtype))


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


@pytest.mark.parametrize("batch,L,dim", [(2, 37, 70), (1, 5, 3)], ids=["ragged", "tiny"])
def test_triton_conv_matches_torch_conv1d(batch, L, dim):
    """L and dim not multiples of the tiles (32 steps x 64 channels); L shorter than a tile."""
    x, w, b, dout = inputs(batch, L, dim)
    assert not x.is_contiguous()
    out, grads = run(lambda *a: causal_conv1d_silu(*a, triton=True), x, w, b, dout)
    ref, ref_grads = run(causal_conv1d_silu_torch, x, w, b, dout)
    assert out.shape == (batch, L, dim) and out.is_contiguous()
    assert rel_err(out, ref) < 1e-5
    for got, want in zip(grads, ref_grads):
        assert got.shape == want.shape and rel_err(got, want) < 1e-5


def test_bfloat16_activations_match():
    """bf16 x (as under autocast), float32 weights; against float32 torch on the same x."""
    x, w, b, dout = inputs(2, 40, 64, dtype=torch.bfloat16, seed=1)
    out, grads = run(lambda *a: causal_conv1d_silu(*a, triton=True), x, w, b, dout)
    ref, ref_grads = run(causal_conv1d_silu_torch, x.float(), w, b, dout)
    assert out.dtype == torch.bfloat16 and rel_err(out, ref) < 2e-2
    assert [g.dtype for g in grads] == [torch.bfloat16, torch.float32, torch.float32]
    for got, want in zip(grads, ref_grads):
        assert rel_err(got, want) < 2e-2


def test_cpu_tensors_take_torch_and_cuda_tensors_take_triton():
    x, w, b, _ = inputs(1, 4, 3)
    assert causal_conv.use_triton(x) == HAS_CUDA
