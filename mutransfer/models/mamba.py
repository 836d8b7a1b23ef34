"""The Mamba-1 (S6) mixer, following state-spaces/mamba `mamba_simple.Mamba`.

Differences from the reference, on purpose:
- x_proj is three weights (x_proj_dt, x_proj_B, x_proj_C) so that a parameterization can
  give W_Δ, W_B and W_C their own init and LR; `checkpoint.py` maps the fused layout.
- Matrix layers know their base fan-in (see layers.py) so the init can be scaled with width.
- `A_zero` is a mask of state entries whose A is exactly 0 (zero real parts, Liu & Li 2025):
  A = -exp(A_log) cannot reach 0, so A = -exp(A_log) · (1 - mask); all zero by default.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.models.layers import ScaledLinear, log_uniform
from mutransfer.models.trace import active, record
from mutransfer.ops import selective_scan
from mutransfer.ops.causal_conv import causal_conv1d_silu


def dt_rank_for(d_model: int) -> int:
    return math.ceil(d_model / 16)


def inverse_softplus(x: torch.Tensor) -> torch.Tensor:
    return x + torch.log(-torch.expm1(-x))


class MambaMixer(nn.Module):
    def __init__(self, d_model: int, base_d_model: int, *, d_state: int = 16, d_conv: int = 4,
                 expand: int = 2, n_layer: int = 1, dt_min: float = 0.001, dt_max: float = 0.1,
                 dt_init_floor: float = 1e-4, dt_scale: float = 1.0,
                 scan_backend: str | None = None, layer_idx: int = 0) -> None:
        super().__init__()
        self.d_inner = expand * d_model
        self.d_state = d_state
        self.dt_rank = dt_rank_for(d_model)
        self.scan_backend = scan_backend
        self.layer_idx = layer_idx
        base_inner = expand * base_d_model
        self.in_proj = ScaledLinear(d_model, 2 * self.d_inner, role="hidden", base_in=base_d_model)
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner,
                                padding=d_conv - 1, bias=True)
        self.conv1d.param_roles = {"weight": "vector", "bias": "vector"}
        self.x_proj_dt = ScaledLinear(self.d_inner, self.dt_rank, role="hidden", base_in=base_inner)
        self.x_proj_B = ScaledLinear(self.d_inner, d_state, role="ssm_B", base_in=base_inner)
        self.x_proj_C = ScaledLinear(self.d_inner, d_state, role="ssm_C", base_in=base_inner)
        # dt_proj.weight ~ U(±dt_scale/√dt_rank): the Linear default with gain dt_scale
        self.dt_proj = ScaledLinear(self.dt_rank, self.d_inner, role="hidden",
                                    base_in=dt_rank_for(base_d_model), bias=True, gain=dt_scale)
        # out_proj rescaled by 1/√n_layer (the reference's rescale_prenorm_residual)
        self.out_proj = ScaledLinear(self.d_inner, d_model, role="hidden", base_in=base_inner,
                                     gain=1.0 / math.sqrt(n_layer))
        self.out_proj.depth_init_exp = -0.5  # a depth parameterization keeps it at L_base
        A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(self.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))  # S4D-real
        self.D = nn.Parameter(torch.ones(self.d_inner))
        self.register_buffer("A_zero", torch.zeros(self.d_inner, d_state))
        self.param_roles = {"A_log": "vector", "D": "vector"}
        self.dt_min, self.dt_max, self.dt_init_floor = dt_min, dt_max, dt_init_floor
        self.reset_dt()

    # The interface the init schemes use (mutransfer/models/data_init.py), shared with S4D.

    @property
    def channels(self) -> int:
        """Independent SSM channels: d_inner."""
        return self.d_inner

    @property
    def modes(self) -> int:
        """Eigenvalues of A per channel: d_state."""
        return self.d_state

    def reset_dt(self, dt: torch.Tensor | None = None) -> None:
        """Δ bias so that softplus(bias) ~ logU[dt_min, dt_max] (or the given Δ values)."""
        if dt is None:
            dt = log_uniform(self.d_inner, self.dt_min, self.dt_max)
        dt = dt.clamp(min=self.dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(inverse_softplus(dt))

    def zero_real_parts(self, mask: torch.Tensor) -> None:
        """A = 0 exactly on the (channels, modes) entries of `mask`, by the `A_zero` mask."""
        with torch.no_grad():
            self.A_zero[mask] = 1.0

    def ssm_input_module(self) -> nn.Module:
        """The module whose input is the SSM's input sequence (batch, L, channels)."""
        return self.x_proj_dt

    def A(self) -> torch.Tensor:
        """A = -exp(A_log), with channels in `A_zero` (mask) set to exactly 0."""
        A = -torch.exp(self.A_log.float())
        return A * (1.0 - self.A_zero)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (batch, L, d_model) -> (batch, L, d_model).

        Every activation stays in the (batch, L, channels) layout the projections produce;
        the scan gets (batch, channels, L) views of those buffers (the triton backend reads
        them in place, the CPU backends copy what they need) and returns y as a view of a
        (batch, L, d_inner) buffer, which out_proj reads as is. The causal conv + SiLU reads
        the x half of in_proj's output in place and writes (batch, L, d_inner): on CUDA by
        triton kernels, elsewhere by PyTorch's conv1d and one copy (ops/causal_conv.py).
        """
        p = f"layer{self.layer_idx}."
        xz = self.in_proj(h)
        record(p + "in_proj", xz)
        x, z = xz.split(self.d_inner, dim=-1)  # (b, L, d_inner) views
        x = causal_conv1d_silu(x, self.conv1d.weight, self.conv1d.bias)  # contiguous (b, L, d)
        record(p + "conv", x.transpose(1, 2))
        dt = self.dt_proj.project(self.x_proj_dt(x))  # bias added inside the scan
        Bm, Cm = self.x_proj_B(x), self.x_proj_C(x)
        u, dt, Bm, Cm, z = (t.transpose(1, 2) for t in (x, dt, Bm, Cm, z))  # (b, ·, L) views
        if active():
            y = self._traced_scan(u, dt, Bm, Cm, z, p)
        else:
            y = selective_scan(u, dt, self.A(), Bm, Cm, D=self.D.float(), z=z,
                               delta_bias=self.dt_proj.bias.float(), delta_softplus=True,
                               backend=self.scan_backend)
        return self.out_proj(y.transpose(1, 2))


    def _traced_scan(self, x, dt, Bm, Cm, z, p: str) -> torch.Tensor:
        """The same scan with every intermediate recorded (gate applied here, not fused)."""
        delta = F.softplus(dt + self.dt_proj.bias[:, None])
        record(p + "delta", delta)
        record(p + "B", Bm.contiguous())  # contiguous: the coord check's RMS sums in this order
        record(p + "C", Cm.contiguous())
        y, states = selective_scan(x, delta, self.A(), Bm, Cm, D=None, return_states=True,
                                   backend=self.scan_backend)
        record(p + "ssm_state", states)
        record(p + "ssm_state_out", y)  # the state's contribution C·x, i.e. y - D·u
        y = y + x * self.D[:, None]
        record(p + "ssm_out", y)
        return y * F.silu(z)
