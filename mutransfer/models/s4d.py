"""The S4D mixer: a complex diagonal SSM per channel, applied as a long convolution.

Follows state-spaces/s4 (`models/s4/s4d.py` and the diagonal kernel of `src/models/sequence/
kernels/ssm.py`): H = d_model independent SISO channels (no input projection, as the
reference), each with N/2 complex modes A_n whose conjugates are implied (N = d_state; the
kernel is 2·Re of the sum over the N/2 modes), ZOH (default) or bilinear discretization, the
kernel K_l = 2·Re Σ_n C_n B̄_n Ā_n^l by a Vandermonde product, y = K * u by a causal FFT
convolution of length 2L, plus D·u. Output: `glu` as the reference (GELU, then a Linear
H → 2H and a GLU) or `gated` (y · SiLU(W_z h), then a Linear H → d_model, as Mamba's gate).

Differences from the reference, on purpose:
- Re(A) is stored as is (`A_re`), not as log(-Re(A)), so that a zero real part (Liu & Li 2025)
  is exactly representable and trains freely. With `keep_nonpositive`, A_re is projected onto
  Re <= 0 (in place, at the start of each forward), so a mode that crosses zero stays at zero
  without losing its gradient, as a functional clamp would.
- B is a parameter (ones at init, as the reference's diagonal kernel; S4D-LegS: HiPPO-LegS's B
  in the eigenbasis, as the reference's dplr.py gives `legs` whatever its B_init), not folded
  into C, so that it can carry its own role.
- The ZOH factor (exp(ΔA) - 1)/A is computed as Δ·φ(ΔA) with φ(z) = expm1(z)/z, finite at
  A = 0 (a mode with Re = Im = 0 is then an exact integrator, K_l = 2·Re(C B)·Δ).
- Δ is stored as log Δ, like the reference, but takes the model's LR (no special SSM LR).

Roles (every parameter has exactly one, see mutransfer/param):
- A_re, A_im, log_dt, D: "vector" (per-channel arrays with no fan-in over width).
- B, C: "vector" by default: each channel is an independent SISO system, so B and C have no
  dimension summed over the width and the ssm_B/ssm_C rules (derived for Mamba's x_proj_B/C,
  fan-in d_inner) would mis-scale them; `model.s4d.ssm_roles: ssm` gives them ssm_B/ssm_C.
- output_linear / gate / out_proj weights: "hidden"; their biases: "vector".
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.errors import UserError
from mutransfer.models.layers import ScaledLinear, log_uniform
from mutransfer.models.trace import active, record
from mutransfer.ops.fft_conv import fft_conv
from mutransfer.param.rescalable import RescalableWeight

INITS = ("lin", "inv", "legs", "real")


def legs_frequencies(n_state: int) -> torch.Tensor:
    """Positive imaginary parts (ascending) of the eigenvalues of HiPPO-LegS's normal part.

    A_LegS + P Pᵀ (P_n = √(n + 1/2)) is -I/2 plus a skew-symmetric S with
    S_nk = -√((n + ½)(k + ½)) below the diagonal; the eigenvalues of iS are ±ω.
    """
    q = torch.sqrt(torch.arange(n_state, dtype=torch.float64) + 0.5)
    s = torch.tril(-torch.outer(q, q), diagonal=-1)
    s = s - s.T
    omega = torch.linalg.eigvalsh(1j * s.to(torch.complex128))
    return omega[omega > 0].sort().values[: n_state // 2].float()


LEGS_B_CLIP = 2.0  # the reference's nplr(B_clip=2.0): |Im B_n| <= 2


def legs_input(n_state: int) -> torch.Tensor:
    """B of S4D-LegS, (n_state // 2,) complex, its modes in the order of legs_frequencies.

    As state-spaces/s4 (hippo.py `nplr`, which dplr.py uses for init `legs`): V diagonalises
    A_LegS + P Pᵀ (torch's eigh of (A + P Pᵀ)·(-i), in float64), B = V* B_LegS (B_LegS,n =
    √(2n + 1)) over the modes of negative imaginary part, its imaginary part clipped to
    ±LEGS_B_CLIP. Here Im(A) > 0, the conjugate pair's other half: B is conjugated to match
    (the kernel 2·Re Σ C B̄ Ā^l is the same, C being circular). The clip depends on the phase
    eigh gives each column of V, and that phase on the matrix's last bits: the matrix is
    formed by the reference's own operations (numpy's T M T⁻¹ as hippo.py's `transition`),
    so that eigh sees the same bits (formed otherwise, a matrix equal to within 1e-14 flipped
    the sign of B_n in some modes, e.g. at N = 8, 16, 42, 72). |V* B| alone grows like √n
    (10.2 for the fastest of N = 16's modes, 2.0 after the clip), where ones give 1.
    """
    q = np.arange(n_state, dtype=np.float64)  # hippo.transition('legs', N), as written there
    col, row = np.meshgrid(q, q)
    m = -(np.where(row >= col, 2 * q + 1, 0) - np.diag(q))
    t = np.sqrt(np.diag(2 * q + 1))
    legs = torch.as_tensor(t @ m @ np.linalg.inv(t))
    b_legs = torch.as_tensor(np.diag(t).copy())
    p = torch.sqrt(0.5 + torch.arange(n_state, dtype=torch.float64))  # rank_correction
    w, v = torch.linalg.eigh((legs + p[:, None] * p[None, :]) * -1j)
    order = torch.argsort(w)[: n_state // 2]  # negative imaginary parts, most negative first
    b = v[:, order].conj().T @ b_legs.to(torch.complex128)
    b = torch.complex(b.real, b.imag.clamp(-LEGS_B_CLIP, LEGS_B_CLIP))
    return b.conj().flip(0).to(torch.complex64)  # ascending |Im A|, as legs_frequencies


@functools.cache
def _legs_input_cached(n_state: int) -> torch.Tensor:
    """legs_input, one eigendecomposition per N (every layer at both widths asks for it; 7 s
    at N = 1024). Shared: read it, never write it (S4DMixer copies it into B)."""
    return legs_input(n_state)


def s4d_init(init: str, channels: int, d_state: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(Re A, Im A), each (channels, d_state // 2), of an S4D init (reference: dplr.py)."""
    modes = d_state // 2
    n = torch.arange(modes, dtype=torch.float32)
    re = torch.full((modes,), -0.5)
    if init == "lin":
        im = math.pi * n
    elif init == "inv":
        im = d_state / math.pi * (d_state / (1 + 2 * n) - 1)
    elif init == "legs":
        im = legs_frequencies(2 * modes)
    elif init == "real":
        re, im = -(n + 1), torch.zeros(modes)
    else:
        raise ValueError(f"unknown S4D init {init!r}; choose from {INITS}")
    return re.repeat(channels, 1), im.repeat(channels, 1)


def phi1(z: torch.Tensor) -> torch.Tensor:
    """(e^z - 1)/z, equal to 1 + z/2 + z²/6 near 0 (finite, with finite gradients, at z = 0)."""
    small = z.abs() < 1e-4
    safe = torch.where(small, torch.ones_like(z), z)
    return torch.where(small, 1 + z / 2 + z * z / 6, torch.expm1(safe) / safe)


def discretize(A: torch.Tensor, dt: torch.Tensor, method: str
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(log Ā, B̄ / B): A (H, M) complex, dt (H,). Ā^l is then exp(l · log Ā)."""
    dtA = A * dt[:, None]
    if method == "zoh":
        return dtA, dt[:, None] * phi1(dtA)
    if method == "bilinear":
        denom = 1 - dtA / 2
        return torch.log((1 + dtA / 2) / denom), dt[:, None] / denom
    raise ValueError(f"unknown discretization {method!r}")


def vandermonde(log_dA: torch.Tensor, length: int) -> torch.Tensor:
    """Ā^l for l = 0..length-1: (..., M) -> (..., M, length), complex."""
    steps = torch.arange(length, device=log_dA.device, dtype=log_dA.real.dtype)
    return torch.exp(log_dA.unsqueeze(-1) * steps)


class SSMWeight(RescalableWeight, nn.Module):
    """B or C: a complex (H, M) array stored as its real view, with a role and a multiplier.

    It starts at the reference init (B: ones, S4DMixer sets S4D-LegS's; C: complex N(0, 1));
    when its role is ssm_B or ssm_C a parameterization rescales it like a matrix weight (the
    vector role keeps it).
    """

    def __init__(self, channels: int, modes: int, *, kind: str, role: str) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(channels, modes, 2))
        self.param_roles = {"weight": role}
        self.mult = 1.0
        with torch.no_grad():
            if kind == "ones":
                self.weight[..., 0] = 1.0
            elif kind == "normal":
                self.weight.normal_(0.0, 1 / math.sqrt(2))
            else:
                raise ValueError(f"unknown SSM weight init {kind!r}")

    def value(self) -> torch.Tensor:
        w = torch.view_as_complex(self.weight)
        return w * self.mult if self.mult != 1.0 else w


class S4DMixer(nn.Module):
    def __init__(self, d_model: int, base_d_model: int, *, d_state: int = 64, n_layer: int = 1,
                 dt_min: float = 0.001, dt_max: float = 0.1, init: str = "lin",
                 discretization: str = "zoh", output: str = "glu", ssm_roles: str = "vector",
                 keep_nonpositive: bool = False, layer_idx: int = 0) -> None:
        super().__init__()
        if d_state < 2 or d_state % 2:
            raise UserError(f"model.d_state: S4D needs an even d_state >= 2 (N/2 conjugate "
                            f"pairs), got {d_state}")
        self.channels = d_model
        self.modes = d_state // 2
        self.discretization, self.output = discretization, output
        self.keep_nonpositive, self.layer_idx = keep_nonpositive, layer_idx
        self.dt_min, self.dt_max = dt_min, dt_max
        re, im = s4d_init(init, d_model, d_state)
        self.A_re = nn.Parameter(re)
        self.A_im = nn.Parameter(im)
        self.log_dt = nn.Parameter(torch.zeros(d_model))
        self.reset_dt()
        b_role, c_role = ("ssm_B", "ssm_C") if ssm_roles == "ssm" else ("vector", "vector")
        self.B = SSMWeight(d_model, self.modes, kind="ones", role=b_role)
        if init == "legs":  # the reference's S4D-LegS (dplr.py) ignores B_init: HiPPO's B
            with torch.no_grad():
                self.B.weight.copy_(torch.view_as_real(_legs_input_cached(d_state)).expand_as(
                    self.B.weight))
        self.C = SSMWeight(d_model, self.modes, kind="normal", role=c_role)
        self.D = nn.Parameter(torch.randn(d_model))
        self.param_roles = {"A_re": "vector", "A_im": "vector", "log_dt": "vector",
                            "D": "vector"}
        if output == "glu":
            self.output_linear = ScaledLinear(d_model, 2 * d_model, role="hidden",
                                              base_in=base_d_model, bias=True)
        elif output == "gated":
            self.gate = ScaledLinear(d_model, d_model, role="hidden", base_in=base_d_model)
            # 1/√n_layer as Mamba's out_proj (the reference's rescale_prenorm_residual)
            self.out_proj = ScaledLinear(d_model, d_model, role="hidden", base_in=base_d_model,
                                         gain=1.0 / math.sqrt(n_layer))
            self.out_proj.depth_init_exp = -0.5  # a depth parameterization: as at L_base
        else:
            raise ValueError(f"unknown S4D output {output!r}")

    @classmethod
    def from_config(cls, width: int, mc, layer_idx: int = 0) -> S4DMixer:
        """From a ModelConfig (mutransfer/config.py); `mc.expand` is not used (H = width)."""
        o = mc.s4d
        return cls(width, mc.base_width, d_state=mc.d_state, n_layer=mc.n_layer,
                   dt_min=mc.dt_min, dt_max=mc.dt_max, init=o.init,
                   discretization=o.discretization, output=o.output, ssm_roles=o.ssm_roles,
                   keep_nonpositive=mc.keep_nonpositive, layer_idx=layer_idx)

    # The interface the init schemes use (mutransfer/models/data_init.py), shared with Mamba;
    # `channels` (H) and `modes` (N/2) are attributes.

    def reset_dt(self, dt: torch.Tensor | None = None) -> None:
        """Δ ~ logU[dt_min, dt_max] per channel (or the given Δ values)."""
        if dt is None:
            dt = log_uniform(self.channels, self.dt_min, self.dt_max)
        with torch.no_grad():
            self.log_dt.copy_(torch.log(dt))

    def zero_real_parts(self, mask: torch.Tensor) -> None:
        """Re(A) = 0 exactly on the (channels, modes) entries of `mask` (trainable)."""
        with torch.no_grad():
            self.A_re[mask] = 0.0

    def ssm_input_module(self) -> nn.Module:
        """The module whose input is the SSM's input sequence (batch, L, channels): the mixer."""
        return self

    def dt(self) -> torch.Tensor:
        return torch.exp(self.log_dt)

    def A(self) -> torch.Tensor:
        """The continuous-time eigenvalues, (H, M) complex."""
        if self.keep_nonpositive and bool((self.A_re > 0).any()):
            with torch.no_grad():  # projection: see the module docstring
                self.A_re.clamp_(max=0.0)
        return torch.complex(self.A_re, self.A_im)

    def kernel(self, length: int) -> torch.Tensor:
        """K (H, length), real: K_l = 2·Re Σ_n C_n B̄_n Ā_n^l."""
        log_dA, dB = discretize(self.A(), self.dt(), self.discretization)
        coef = self.C.value() * self.B.value() * dB
        return 2 * torch.einsum("hn,hnl->hl", coef, vandermonde(log_dA, length)).real

    def states(self, u: torch.Tensor) -> torch.Tensor:
        """The latent states x_t (b, H, M, L), complex: x_t = Ā x_{t-1} + B̄ u_t (for tracing)."""
        log_dA, dB = discretize(self.A(), self.dt(), self.discretization)
        k = (self.B.value() * dB).unsqueeze(-1) * vandermonde(log_dA, u.shape[-1])
        return fft_conv(u.unsqueeze(2).to(k.dtype), k)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (batch, L, d_model) -> (batch, L, d_model)."""
        p = f"layer{self.layer_idx}."
        u = h.transpose(1, 2).float()  # (b, H, L); the kernel and FFT run in fp32
        y = fft_conv(u, self.kernel(u.shape[-1]))
        if active():
            record(p + "ssm_state", torch.view_as_real(self.states(u)))
        record(p + "ssm_state_out", y)  # the state's contribution, y - D·u
        y = y + u * self.D[:, None]
        record(p + "ssm_out", y)
        y = y.transpose(1, 2).to(h.dtype)
        if self.output == "glu":
            return F.glu(self.output_linear(F.gelu(y)), dim=-1)
        return self.out_proj(y * F.silu(self.gate(h)))
