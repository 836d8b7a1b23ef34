"""Input preparation and output finishing shared by the scan backends."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class ScanInputs:
    """Scan inputs in float32 with the Δ bias and softplus already applied."""

    u: torch.Tensor  # (batch, dim, L)
    delta: torch.Tensor  # (batch, dim, L), positive timescales
    A: torch.Tensor  # (dim, n)
    B: torch.Tensor  # (batch, n, L)
    C: torch.Tensor  # (batch, n, L)

    @classmethod
    def prepare(cls, u, delta, A, B, C, delta_bias=None, delta_softplus=False) -> ScanInputs:
        delta = delta.float()
        if delta_bias is not None:
            delta = delta + delta_bias[..., None].float()
        if delta_softplus:
            delta = F.softplus(delta)
        return cls(u.float(), delta, A.float(), B.float(), C.float())


def finish_output(y, inp: ScanInputs, D, z, dtype_in, states):
    """y + D·u, gated by SiLU(z), cast back to the input dtype (as selective_scan_ref)."""
    out = y if D is None else y + inp.u * D.float()[:, None]
    if z is not None:
        out = out * F.silu(z.float())
    out = out.to(dtype_in)
    return out if states is None else (out, states)

