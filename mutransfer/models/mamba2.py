"""The Mamba-2 (SSD) mixer, following state-spaces/mamba `mamba_ssm/modules/mamba2.py` `Mamba2`.

in_proj h -> (z, x, B, C, dt); a causal depthwise conv + SiLU over xBC; per head a scalar
A = -exp(A_log) (A_log = log U[A_init_min, A_init_max]), Δ = softplus(dt + dt_bias) with the
dt bias at Mamba's init (softplus(dt_bias) ~ logU[dt_min, dt_max], floored at dt_init_floor),
B and C shared by the heads of each of `ngroups` groups, D skip per head; the SSD scan
(mutransfer/ops/ssd.py); the gated RMSNorm norm(y · SiLU(z)) (RMSNormGated with
norm_before_gate=False, one RMS per group of d_inner / ngroups channels) and out_proj.

What widens with the width (`widen`), `headdim` being the head dim at the base width:
- heads (default, as the reference: headdim fixed): nheads = d_inner / headdim grows;
- headdim: nheads fixed at base_d_inner / headdim, the head dim d_inner / nheads grows.
At the base width both are the same model.

Differences from the reference, on purpose:
- in_proj is four weights: in_proj_zx (z and x, d -> 2·d_inner), in_proj_B and in_proj_C
  (d -> ngroups·d_state each) and in_proj_dt (d -> nheads), so that a parameterization can
  give B, C and Δ their own init and LR (the reference's fused layout is their
  concatenation in the order z, x, B, C, dt). The conv's channels are in the reference's
  order (x, B, C), as one depthwise conv.
- Matrix layers know their base fan-in (layers.py) so their init can be scaled with width;
  in_proj has no bias and its weights start at PyTorch's Linear default, as the reference's
  (mixer_seq_simple's `_init_weights` zeroes only biases); out_proj is rescaled by
  1/√n_layer as the reference's rescale_prenorm_residual.
- Only the default reference options: no d_ssm (MLP part), D per head (D_has_hdim False),
  rmsnorm on, no dt_limit, conv with bias and PyTorch's default conv init (conv_init None).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.models.layers import ScaledLinear, log_uniform
from mutransfer.models.mamba import inverse_softplus
from mutransfer.models.trace import active, record
from mutransfer.ops.causal_conv import causal_conv1d_silu
from mutransfer.ops.ssd import discretize, ssd_scan
from mutransfer.ops.ssd_reference import ssd_sequential

WIDEN = ("heads", "headdim")


def head_layout(d_inner: int, base_d_inner: int, headdim: int, widen: str) -> tuple[int, int]:
    """(nheads, head dim) at `d_inner`; ValueError (one line) when it does not divide."""
    if base_d_inner % headdim:
        raise ValueError(f"headdim {headdim} does not divide the base width's d_inner "
                         f"{base_d_inner}")
    if widen == "heads":
        if d_inner % headdim:
            raise ValueError(f"headdim {headdim} does not divide d_inner {d_inner}")
        return d_inner // headdim, headdim
    if widen != "headdim":
        raise ValueError(f"unknown widen {widen!r}; choose from {', '.join(WIDEN)}")
    nheads = base_d_inner // headdim
    if d_inner % nheads:
        raise ValueError(f"the {nheads} heads of the base width do not divide d_inner {d_inner}")
    return nheads, d_inner // nheads


class GatedRMSNorm(nn.Module):
    """norm(y · SiLU(z)) · weight, one RMS per group of `group_size` channels (RMSNormGated of
    mamba_ssm/ops/triton/layernorm_gated.py with norm_before_gate=False, eps 1e-5)."""

    def __init__(self, dim: int, group_size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.group_size, self.eps = group_size, eps
        self.param_roles = {"weight": "vector"}

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        g = (y.float() * F.silu(z.float()))
        g = g.unflatten(-1, (-1, self.group_size))
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        return (g.flatten(-2) * self.weight.float()).to(y.dtype)


class Mamba2Mixer(nn.Module):
    def __init__(self, d_model: int, base_d_model: int, *, d_state: int = 128, d_conv: int = 4,
                 expand: int = 2, headdim: int = 64, ngroups: int = 1, widen: str = "heads",
                 A_init_range: tuple[float, float] = (1.0, 16.0), dt_min: float = 0.001,
                 dt_max: float = 0.1, dt_init_floor: float = 1e-4, chunk_size: int = 64,
                 n_layer: int = 1, scan_backend: str | None = None, layer_idx: int = 0) -> None:
        super().__init__()
        self.d_inner, base_inner = expand * d_model, expand * base_d_model
        self.nheads, self.headdim = head_layout(self.d_inner, base_inner, headdim, widen)
        if self.nheads % ngroups:
            raise ValueError(f"ngroups {ngroups} does not divide the {self.nheads} heads")
        self.d_state, self.ngroups, self.widen = d_state, ngroups, widen
        self.chunk_size, self.scan_backend, self.layer_idx = chunk_size, scan_backend, layer_idx
        gn = ngroups * d_state
        self.in_proj_zx = ScaledLinear(d_model, 2 * self.d_inner, role="hidden",
                                       base_in=base_d_model)
        self.in_proj_B = ScaledLinear(d_model, gn, role="ssm_B", base_in=base_d_model)
        self.in_proj_C = ScaledLinear(d_model, gn, role="ssm_C", base_in=base_d_model)
        # Δ per head: a hidden matrix (both dims scale when heads widen; with fixed heads
        # the hidden rule is still the derived one under Adam: docs/parameterizations.md)
        self.in_proj_dt = ScaledLinear(d_model, self.nheads, role="hidden",
                                       base_in=base_d_model)
        conv_dim = self.d_inner + 2 * gn
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim,
                                padding=d_conv - 1, bias=True)
        self.conv1d.param_roles = {"weight": "vector", "bias": "vector"}
        self.dt_bias = nn.Parameter(inverse_softplus(
            log_uniform(self.nheads, dt_min, dt_max).clamp(min=dt_init_floor)))
        A = torch.empty(self.nheads).uniform_(*A_init_range)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.param_roles = {"dt_bias": "vector", "A_log": "vector", "D": "vector"}
        self.norm = GatedRMSNorm(self.d_inner, self.d_inner // ngroups)
        self.out_proj = ScaledLinear(self.d_inner, d_model, role="hidden", base_in=base_inner,
                                     gain=1.0 / math.sqrt(n_layer))
        self.out_proj.depth_init_exp = -0.5  # a depth parameterization keeps it at L_base

    def A(self) -> torch.Tensor:
        return -torch.exp(self.A_log.float())

    def _split_heads(self, x, Bm, Cm):
        b, L = x.shape[:2]
        return (x.reshape(b, L, self.nheads, self.headdim),
                Bm.reshape(b, L, self.ngroups, self.d_state),
                Cm.reshape(b, L, self.ngroups, self.d_state))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (batch, L, d_model) -> (batch, L, d_model)."""
        p = f"layer{self.layer_idx}."
        zx = self.in_proj_zx(h)
        record(p + "in_proj", zx)
        z, x = zx.split(self.d_inner, dim=-1)
        xBC = torch.cat([x, self.in_proj_B(h), self.in_proj_C(h)], dim=-1)
        xBC = causal_conv1d_silu(xBC, self.conv1d.weight, self.conv1d.bias)
        x, Bm, Cm = xBC.split([self.d_inner, self.ngroups * self.d_state,
                               self.ngroups * self.d_state], dim=-1)
        record(p + "conv", x)
        x, Bm, Cm = self._split_heads(x, Bm, Cm)
        dt = self.in_proj_dt(h)
        if active():
            y = self._traced_scan(x, dt, Bm, Cm, p)
        else:
            y = ssd_scan(x, dt, self.A(), Bm, Cm, D=self.D, dt_bias=self.dt_bias,
                         chunk_size=self.chunk_size, backend=self.scan_backend)
        y = self.norm(y.flatten(-2), z)
        return self.out_proj(y)

    def _traced_scan(self, x, dt, Bm, Cm, p: str) -> torch.Tensor:
        """The same scan with every intermediate recorded (states from the recurrence)."""
        X, a, delta = discretize(x, dt, self.A(), self.dt_bias)
        record(p + "delta", delta)
        record(p + "B", Bm.contiguous())
        record(p + "C", Cm.contiguous())
        y, states = ssd_sequential(X, a.to(X.dtype), Bm, Cm, return_states=True)
        record(p + "ssm_state", states)
        record(p + "ssm_state_out", y)  # the state's contribution, y - D·x
        y = y + x * self.D[:, None]
        record(p + "ssm_out", y)
        return y
