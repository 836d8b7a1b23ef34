"""The chunked SSD scan (Mamba-2) equals its two references, forward and backward, in float64:
the materialised quadratic form of ssd_minimal and the step-by-step recurrence."""

from __future__ import annotations

import pytest
import torch

from mutransfer.errors import UserError
from mutransfer.ops.ssd import discretize, ssd_scan
from mutransfer.ops.ssd_chunked import ssd_chunked
from mutransfer.ops.ssd_reference import ssd_quadratic, ssd_sequential

# (batch, L, heads, headdim, groups, d_state, chunk): L a multiple of the chunk, L not one
# (padding), a chunk longer than L, heads sharing groups
SHAPES = [(2, 32, 4, 3, 2, 5, 8), (1, 37, 6, 4, 3, 4, 16), (3, 20, 2, 2, 1, 3, 64)]


def inputs(b, L, h, p, g, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    f64 = {"dtype": torch.float64, "generator": gen}
    X = torch.randn(b, L, h, p, **f64)
    a = -torch.rand(b, L, h, **f64)  # log decays A·Δ in (-1, 0]
    B, C = torch.randn(b, L, g, n, **f64), torch.randn(b, L, g, n, **f64)
    return [t.requires_grad_() for t in (X, a, B, C)]


def value_and_grads(fn, args):
    y = fn(*args)
    w = torch.randn(y.shape, dtype=y.dtype, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((y * w).sum(), args)
    return y.detach(), grads


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("reference", [ssd_quadratic, ssd_sequential],
                         ids=["quadratic", "sequential"])
def test_chunked_scan_equals_the_reference_forward_and_backward(shape, reference):
    *dims, chunk = shape
    args = inputs(*dims)
    y, grads = value_and_grads(lambda *t: ssd_chunked(*t, chunk_size=chunk), args)
    y_ref, grads_ref = value_and_grads(reference, args)
    assert (y - y_ref).abs().max() <= 1e-5
    for name, g, g_ref in zip("X a B C".split(), grads, grads_ref):
        assert (g - g_ref).abs().max() <= 1e-5, name


def test_the_two_references_agree_and_states_end_where_the_output_reads_them():
    X, a, B, C = inputs(2, 12, 4, 2, 2, 3)
    y_seq, states = ssd_sequential(X, a, B, C, return_states=True)
    assert torch.allclose(ssd_quadratic(X, a, B, C), y_seq, atol=1e-12)
    # y_t = h_t · C_t, with head h reading group h // 2
    y_last = torch.einsum("bhpn,bhn->bhp", states[..., -1], C[:, -1].repeat_interleave(2, 1))
    assert torch.allclose(y_last, y_seq[:, -1], atol=1e-12)


def test_a_step_with_zero_decay_forgets_the_past():
    X, a, B, C = inputs(1, 10, 2, 2, 1, 3)
    a = a.detach().clone()
    a[:, 5] = -1e3  # exp(a) underflows to 0: the state restarts at step 5
    y = ssd_chunked(X, a, B, C, chunk_size=4)
    y_fresh = ssd_chunked(X[:, 5:], a[:, 5:], B[:, 5:], C[:, 5:], chunk_size=4)
    assert torch.allclose(y[:, 5:], y_fresh, atol=1e-12)


def test_scan_applies_softplus_bias_and_the_d_skip():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 9, 4, 3, dtype=torch.float64, generator=gen)
    dt = torch.randn(2, 9, 4, dtype=torch.float64, generator=gen)
    A = -torch.rand(4, dtype=torch.float64, generator=gen) - 0.5
    B, C = (torch.randn(2, 9, 2, 5, dtype=torch.float64, generator=gen) for _ in range(2))
    D, bias = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    delta = torch.nn.functional.softplus(dt + bias)
    want = ssd_sequential(x * delta[..., None], A * delta, B, C) + x * D[:, None]
    for backend in ("chunked", "reference", "quadratic"):
        y = ssd_scan(x, dt, A, B, C, D=D, dt_bias=bias, chunk_size=4, backend=backend)
        assert torch.allclose(y, want, atol=1e-12), backend
    X, a, d = discretize(x, dt, A, bias)
    assert torch.allclose(d, delta) and torch.allclose(a, A * delta)


def test_mamba_ssm_backend_is_a_user_error_without_cuda_or_the_package():
    x = torch.randn(1, 4, 2, 2)
    args = (x, torch.randn(1, 4, 2), -torch.ones(2), torch.randn(1, 4, 1, 3),
            torch.randn(1, 4, 1, 3))
    with pytest.raises(UserError, match="mamba_ssm"):
        ssd_scan(*args, backend="mamba_ssm")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_mamba_ssm_backend_equals_the_chunked_scan_on_cuda():
    pytest.importorskip("mamba_ssm.ops.triton.ssd_combined")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 128, 4, 16, generator=gen)
    dt, A = torch.randn(2, 128, 4, generator=gen), -torch.rand(4, generator=gen) - 0.5
    B, C = torch.randn(2, 128, 2, 16, generator=gen), torch.randn(2, 128, 2, 16, generator=gen)
    D, bias = torch.randn(4, generator=gen), torch.randn(4, generator=gen)
    args = [t.cuda() for t in (x, dt, A, B, C)]
    y = ssd_scan(*args, D=D.cuda(), dt_bias=bias.cuda(), backend="mamba_ssm")
    y_ref = ssd_scan(*args, D=D.cuda(), dt_bias=bias.cuda(), backend="chunked")
    assert torch.allclose(y, y_ref, atol=2e-3, rtol=2e-3)
