"""Mamba-2 recomputed independently of the package's own references, against state-spaces/mamba:
the SSD scan against a per-head loop of the recurrence written here, the mixer as the trainer
builds it against the reference `Mamba2` forward (one fused in_proj split z, x, B, C, dt; a
depthwise causal conv + SiLU over xBC; RMSNormGated with norm_before_gate=False; out_proj),
and the reference init of every mixer tensor."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.models.mamba2 import Mamba2Mixer
from mutransfer.ops.ssd import ssd_scan

F64 = torch.float64


def recurrence(x, dt, A, B, C, D, dt_bias):
    """h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t, y_t = C_t h_t + D x_t, head by head, head h
    reading group h // (heads / groups), Δ = softplus(dt + dt_bias)."""
    b, L, H, P = x.shape
    per_group = H // B.shape[2]
    delta = F.softplus(dt + dt_bias)
    heads = []
    for h in range(H):
        g, state, ys = h // per_group, x.new_zeros(b, P, B.shape[3]), []
        for t in range(L):
            d = delta[:, t, h, None, None]
            state = torch.exp(d * A[h]) * state + d * x[:, t, h, :, None] * B[:, t, g, None, :]
            ys.append(torch.einsum("bpn,bn->bp", state, C[:, t, g]) + D[h] * x[:, t, h])
        heads.append(torch.stack(ys, 1))
    return torch.stack(heads, 2)


# (batch, L, heads, headdim, groups, d_state, chunk): chunk dividing L, not dividing it,
# longer than L, one step per chunk; one group, several, one per head
SHAPES = [(2, 12, 4, 3, 2, 5, 4), (1, 13, 6, 2, 3, 4, 5), (2, 7, 4, 5, 1, 3, 64),
          (1, 9, 4, 2, 4, 3, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("backend", ["chunked", "reference", "quadratic"])
def test_ssd_scan_is_the_per_head_recurrence_forward_and_backward(shape, backend):
    """Every backend of `ssd_scan` (Δ, A, D and the grouping of B and C included) is the
    recurrence of the Mamba-2 paper, and so are its gradients with respect to all seven
    inputs, whether or not the chunk divides the length."""
    b, L, H, P, G, N, chunk = shape
    gen = torch.Generator().manual_seed(0)

    def rand(*s):
        return torch.randn(*s, dtype=F64, generator=gen)

    args = [rand(b, L, H, P), rand(b, L, H), -1 - 3 * rand(H).abs(), rand(b, L, G, N),
            rand(b, L, G, N), rand(H), rand(H)]
    args = [t.requires_grad_() for t in args]
    y = ssd_scan(*args[:5], D=args[5], dt_bias=args[6], chunk_size=chunk, backend=backend)
    want = recurrence(*args)
    assert (y - want).abs().max() < 1e-10
    w = rand(*y.shape)
    grads = torch.autograd.grad((y * w).sum(), args)
    grads_want = torch.autograd.grad((want * w).sum(), args)
    for name, g, g_want in zip("x dt A B C D dt_bias".split(), grads, grads_want):
        assert (g - g_want).abs().max() < 1e-10, name


def mamba2_config(**mamba2) -> TrialConfig:
    return TrialConfig(width=48, model={"arch": "mamba2", "n_layer": 2, "d_state": 6,
                                        "base_width": 24, "mamba2": mamba2},
                       train={"batch_size": 2, "seq_len": 16, "device": "cpu"})


def built_mixer(cfg: TrialConfig) -> Mamba2Mixer:
    torch.manual_seed(0)
    return build_model(cfg, load_data(cfg.data).spec).layers[0].mixer


def reference_mamba2(m: Mamba2Mixer, u: torch.Tensor) -> torch.Tensor:
    """state-spaces/mamba `Mamba2.forward` (the unfused path, no d_ssm, rmsnorm on) with its
    in_proj the concatenation [z, x, B, C, dt] of the mixer's four weights."""
    d_inner, G, N, H = m.d_inner, m.ngroups, m.d_state, m.nheads
    W = torch.cat([m.in_proj_zx.weight, m.in_proj_B.weight, m.in_proj_C.weight,
                   m.in_proj_dt.weight])
    z, xBC, dt = torch.split(u @ W.T, [d_inner, d_inner + 2 * G * N, H], dim=-1)
    K = m.conv1d.weight.shape[-1]
    xBC = F.silu(m.conv1d(xBC.transpose(1, 2)).transpose(1, 2)[:, :-(K - 1)])
    x, B, C = torch.split(xBC, [d_inner, G * N, G * N], dim=-1)
    b, L = u.shape[:2]
    y = recurrence(x.reshape(b, L, H, -1), dt, -torch.exp(m.A_log.float()),
                   B.reshape(b, L, G, N), C.reshape(b, L, G, N), m.D, m.dt_bias)
    # rms_norm_ref(norm_before_gate=False, group_size=d_inner // ngroups, eps 1e-5)
    g = (y.reshape(b, L, d_inner) * F.silu(z)).reshape(b, L, G, -1)
    g = g / torch.sqrt(g.square().mean(-1, keepdim=True) + 1e-5)
    return (g.reshape(b, L, d_inner) * m.norm.weight) @ m.out_proj.weight.T


@pytest.mark.parametrize("mamba2", [{"headdim": 4, "ngroups": 2, "chunk_size": 5},
                                    {"headdim": 6, "ngroups": 1, "chunk_size": 64},
                                    {"headdim": 4, "ngroups": 3, "widen": "headdim",
                                     "chunk_size": 3}])
def test_built_mixer_is_the_reference_mamba2_forward(mamba2):
    """The mixer `build_model` makes for arch mamba2 computes state-spaces/mamba's Mamba2 with
    its in_proj split in the reference's order (z, x, B, C, dt), forward and backward."""
    m = built_mixer(mamba2_config(**mamba2))
    with torch.no_grad():  # away from the init's ones, so that D and the gain are read
        m.D.uniform_(-1, 1)
        m.norm.weight.uniform_(0.5, 1.5)
    u = torch.randn(2, 11, 48, generator=torch.Generator().manual_seed(1))
    y, want = m(u), reference_mamba2(m, u)
    assert (y - want).abs().max() < 1e-5 * want.abs().max()
    params = [p for p in m.parameters()]
    grads = torch.autograd.grad(y.square().sum(), params)
    grads_want = torch.autograd.grad(want.square().sum(), params)
    for (name, _), g, g_want in zip(m.named_parameters(), grads, grads_want):
        assert (g - g_want).abs().max() < 1e-4 * g_want.abs().max(), name


def test_built_mixer_starts_at_the_reference_init():
    """Under sp (the reference init at every width): in_proj and the conv at PyTorch's default
    (U(±1/√fan_in)), out_proj at it divided by √n_layer, A = U[A_init_min, A_init_max], Δ's
    bias the inverse softplus of logU[dt_min, dt_max] floored at dt_init_floor, D and the
    gated norm's gain one."""
    m = built_mixer(mamba2_config(headdim=1, A_init_min=2.0, A_init_max=9.0))  # 96 heads
    bounds = {"in_proj_zx": 1 / math.sqrt(48), "in_proj_B": 1 / math.sqrt(48),
              "in_proj_C": 1 / math.sqrt(48), "in_proj_dt": 1 / math.sqrt(48),
              "out_proj": 1 / math.sqrt(96 * 2)}
    for name, bound in bounds.items():
        w = getattr(m, name).weight.abs()
        assert 0.9 * bound < w.max() <= bound, name
    conv = m.conv1d.weight.abs().max(), m.conv1d.bias.abs().max()
    assert all(0.9 * 0.5 < c <= 0.5 for c in conv)  # fan-in d_conv = 4
    A = m.A_log.exp()
    assert 2 <= A.min() < 3 and 8 < A.max() <= 9
    dt = F.softplus(m.dt_bias.double())
    u = (dt.log() - math.log(1e-3)) / (math.log(0.1) - math.log(1e-3))
    assert u.min() >= -1e-6 and u.max() <= 1 + 1e-6 and abs(u.mean() - 0.5) < 0.1
    assert m.D.eq(1).all() and m.norm.weight.eq(1).all()
    floored = Mamba2Mixer(96, 96, d_state=2, headdim=1, dt_min=1e-5, dt_max=1e-3,
                          dt_init_floor=1e-4)
    dt = F.softplus(floored.dt_bias.double())
    assert (dt - 1e-4).abs().min() < 1e-9 and dt.min() > 1e-4 - 1e-9  # half of logU below it


def test_ssd_scan_refuses_b_and_c_of_no_groups_with_a_value_error():
    """B and C with zero groups are a misshapen argument like any other: a one-line
    ValueError from the shape check, not a ZeroDivisionError from `heads % groups`."""
    x, dt, A = torch.randn(1, 5, 4, 2), torch.randn(1, 5, 4), -torch.rand(4)
    B = C = torch.randn(1, 5, 0, 3)
    with pytest.raises(ValueError, match="0 groups do not divide 4 heads"):
        ssd_scan(x, dt, A, B, C)
