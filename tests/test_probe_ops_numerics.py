"""Numerics of the SSD (Mamba-2) backends and the FFT convolution at the edges of their inputs:
decays that differ by many orders of magnitude within a chunk, log decays summing to -inf,
bf16 and float16 inputs, a kernel longer than the signal."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mutransfer.ops.fft_conv import fft_conv
from mutransfer.ops.ssd import ssd_scan

SSD_BACKENDS = ("chunked", "reference", "quadratic")


def ssd_loop(x, dt, A, B, C, D=None, dt_bias=None, dt_softplus=True):
    """The recurrence of the Mamba-2 paper in float64, one step at a time:
    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t, y_t = C_t h_t + D x_t."""
    x, dt, A, B, C = (t.double() for t in (x, dt, A, B, C))
    batch, L, heads, p = x.shape
    reps = heads // B.shape[2]
    if dt_bias is not None:
        dt = dt + dt_bias.double()
    delta = F.softplus(dt) if dt_softplus else dt
    h = torch.zeros(batch, heads, p, B.shape[3], dtype=torch.float64)
    ys = []
    for t in range(L):
        Bt, Ct = B[:, t].repeat_interleave(reps, 1), C[:, t].repeat_interleave(reps, 1)
        h = torch.exp(delta[:, t] * A)[..., None, None] * h + \
            (delta[:, t, :, None] * x[:, t])[..., None] * Bt[:, :, None, :]
        y = torch.einsum("bhpn,bhn->bhp", h, Ct)
        ys.append(y if D is None else y + D.double()[:, None] * x[:, t])
    return torch.stack(ys, 1)


def ssd_inputs(batch, L, heads, p, groups, n, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    return dict(x=r(batch, L, heads, p).to(dtype), dt=r(batch, L, heads).to(dtype),
                A=-(0.5 + torch.rand(heads, generator=g)), B=r(batch, L, groups, n).to(dtype),
                C=r(batch, L, groups, n).to(dtype), D=r(heads), dt_bias=0.5 * r(heads))


@pytest.mark.parametrize("backend", SSD_BACKENDS)
def test_ssd_keeps_the_small_decays_that_follow_a_large_one_in_the_same_chunk(backend):
    # one step with Δ = 1e6 (a = -1e6, e.g. a reset) then Δ = 0.03: the decays after the
    # large one must not vanish in the rounding of a cumulative sum near -1e6 (the chunked
    # scan took exp(a_cum[end] - a_cum[s]), which lost them: 2.4e-3 relative error here)
    inp = ssd_inputs(1, 64, 1, 1, 1, 1)
    inp["dt"] = torch.full((1, 64, 1), 3e-2)
    inp["dt"][:, 0] = 1e6
    inp["x"][:, 0] = 0.0
    args = dict(x=inp["x"], dt=inp["dt"], A=torch.tensor([-1.0]), B=inp["B"], C=inp["C"],
                dt_softplus=False)
    want = ssd_loop(**args)
    y = ssd_scan(**args, chunk_size=32, backend=backend).double()
    assert ((y - want).abs().max() / want.abs().max()).item() < 1e-6


@pytest.mark.parametrize("backend", SSD_BACKENDS)
def test_ssd_output_and_gradients_stay_finite_when_log_decays_sum_to_minus_infinity(backend):
    # a = A Δ = -3e38 per step: finite, but two of them sum to -inf in float32; the
    # recurrence just decays to 0 (the chunked scan's a_cum[end] - a_cum[s] was -inf - -inf)
    inp = ssd_inputs(1, 8, 2, 2, 1, 3)
    inp["A"] = torch.tensor([-3e38, -1.0])
    leaves = {k: v.requires_grad_() for k, v in inp.items()}
    y = ssd_scan(**leaves, chunk_size=4, backend=backend)
    grads = torch.autograd.grad(y.sum(), list(leaves.values()))
    assert torch.isfinite(y).all()
    assert all(torch.isfinite(g).all() for g in grads)
    with torch.no_grad():
        want = ssd_loop(**inp)
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 1e-5


@pytest.mark.parametrize("backend", SSD_BACKENDS)
def test_ssd_takes_bf16_activations_outside_autocast_and_returns_bf16(backend):
    # x, dt, B and C in bf16 with float32 A, D and dt_bias, as a bf16 model on the CPU has
    # them: every backend crashed mixing the float32 decays with bf16 operands in a matmul
    inp = ssd_inputs(2, 17, 4, 3, 2, 5, dtype=torch.bfloat16)
    leaves = {k: v.requires_grad_() for k, v in inp.items()}
    y = ssd_scan(**leaves, chunk_size=4, backend=backend)
    grads = torch.autograd.grad(y.float().square().sum(), list(leaves.values()))
    assert y.dtype == torch.bfloat16
    assert all(g.dtype == leaves[k].dtype for g, k in zip(grads, leaves))
    with torch.no_grad():
        want = ssd_loop(**inp)
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 2e-2


def direct_causal_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """y_t = Σ_{l<=t} k_l u_{t-l}, by F.conv1d over a left-padded u, in float64."""
    L = u.shape[-1]
    k = F.pad(k.double(), (0, max(0, L - k.shape[-1])))[..., :L]
    batch = u.shape[:-1]
    u2 = F.pad(u.double().reshape(1, -1, L), (L - 1, 0))
    w = k.expand(*batch, L).reshape(-1, 1, L).flip(-1)
    return F.conv1d(u2, w, groups=w.shape[0]).reshape(*batch, L)


@pytest.mark.parametrize("k_len", [5, 17, 40])
def test_fft_conv_is_the_causal_convolution_with_the_first_L_taps_of_any_kernel(k_len):
    # a kernel longer than 2L wrapped around the FFT onto the early outputs (abs error 11 for
    # k_len = 40 at L = 17); shorter kernels are zero-extended
    g = torch.Generator().manual_seed(0)
    u, k = torch.randn(2, 3, 17, generator=g), torch.randn(3, k_len, generator=g)
    y = fft_conv(u, k)
    assert y.shape == u.shape
    assert (y.double() - direct_causal_conv(u, k)).abs().max().item() < 1e-5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fft_conv_takes_half_precision_and_returns_its_dtype(dtype):
    # torch's CPU FFT has no bf16/float16 kernels: fft_conv refused them ("Unsupported dtype")
    g = torch.Generator().manual_seed(0)
    u, k = torch.randn(2, 3, 17, generator=g), torch.randn(3, 17, generator=g)
    y = fft_conv(u.to(dtype), k.to(dtype))
    want = direct_causal_conv(u.to(dtype), k.to(dtype))
    assert y.dtype == dtype and y.shape == u.shape
    assert ((y.double() - want).abs().max() / want.abs().max()).item() < 2e-2
