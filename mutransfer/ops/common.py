"""Input preparation and output finishing shared by the scan backends."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def check_shapes(u, delta, A, B, C, D=None, z=None, delta_bias=None) -> None:
    """Shapes as in selective_scan_ref (real A, B and C varying with batch and time), and
    real floating-point tensors: what every backend takes. Refused with a ValueError rather
    than broadcast (a batch-1 B or Δ ran forward and failed in the chunked backward), cast
    (a complex A lost its imaginary part, an integer u came back truncated) or left to fail
    somewhere inside."""
    if u.dim() != 3 or delta.shape != u.shape or u.shape[-1] < 1:
        raise ValueError(f"u and delta must be (batch, dim, L) alike with L >= 1, got "
                         f"{tuple(u.shape)} and {tuple(delta.shape)}")
    batch, dim, L = u.shape
    if A.dim() != 2 or A.shape[0] != dim or A.is_complex():
        raise ValueError(f"A must be real (dim, n) with dim={dim}, got {tuple(A.shape)}"
                         f"{' complex' if A.is_complex() else ''}")
    n = A.shape[1]
    for name, t in (("B", B), ("C", C)):
        if tuple(t.shape) != (batch, n, L):
            raise ValueError(f"{name} must be (batch, n, L) = {(batch, n, L)}, "
                             f"got {tuple(t.shape)}")
    for name, t in (("D", D), ("delta_bias", delta_bias)):
        if t is not None and tuple(t.shape) != (dim,):
            raise ValueError(f"{name} must be (dim,) = ({dim},), got {tuple(t.shape)}")
    if z is not None and z.shape != u.shape:
        raise ValueError(f"z must be shaped like u {tuple(u.shape)}, got {tuple(z.shape)}")
    check_real_floats(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias)


def check_real_floats(**tensors) -> None:
    """Each tensor given (None: absent) is real floating point: a ValueError naming the
    first that is not (an integer one came back truncated; a complex one lost its
    imaginary part)."""
    for name, t in tensors.items():
        if t is not None and not t.is_floating_point():
            raise ValueError(f"{name} must be a real floating-point tensor, got {t.dtype}")


@dataclass
class ScanInputs:
    """Scan inputs in float32 with the Δ bias and softplus already applied."""

    u: torch.Tensor  # (batch, dim, L)
    delta: torch.Tensor  # (batch, dim, L), positive timescales
    A: torch.Tensor  # (dim, n)
    B: torch.Tensor  # (batch, n, L)
    C: torch.Tensor  # (batch, n, L)

    @classmethod
    def prepare(cls, u, delta, A, B, C, delta_bias=None, delta_softplus=False, D=None,
                z=None) -> ScanInputs:
        check_shapes(u, delta, A, B, C, D, z, delta_bias)
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

