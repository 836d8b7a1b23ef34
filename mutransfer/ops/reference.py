"""The numerics oracle: a plain sequential selective scan in float32.

Follows `selective_scan_ref` of state-spaces/mamba (S6, real A, per-step B and C shared by
all channels). One difference: the loop iterates over `unbind`-ed time slices instead of
indexing `a[:, :, t]`, which keeps the backward pass linear in L (indexing makes every
step's backward write a gradient the size of the whole tensor).
"""

from __future__ import annotations

import torch

from mutransfer.ops.common import ScanInputs, finish_output


def scan_reference(inp: ScanInputs, return_states: bool = False):
    """Returns y (batch, dim, L) in float32 before D/z, and optionally the states (b, d, n, L)."""
    delta, u = inp.delta, inp.u
    deltaA = torch.exp(torch.einsum("bdl,dn->bldn", delta, inp.A))
    deltaB_u = torch.einsum("bdl,bnl,bdl->bldn", delta, inp.B, u)
    Cs = inp.C.transpose(1, 2)  # (b, L, n)
    x = u.new_zeros(u.shape[0], u.shape[1], inp.A.shape[1])
    ys, states = [], []
    for a_t, bu_t, c_t in zip(deltaA.unbind(1), deltaB_u.unbind(1), Cs.unbind(1)):
        x = a_t * x + bu_t
        ys.append(torch.einsum("bdn,bn->bd", x, c_t))
        if return_states:
            states.append(x)
    y = torch.stack(ys, dim=-1)
    return y, (torch.stack(states, dim=-1) if return_states else None)


def selective_scan_reference(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                             delta_softplus=False, return_states=False):
    inp = ScanInputs.prepare(u, delta, A, B, C, delta_bias, delta_softplus, D, z)
    y, states = scan_reference(inp, return_states)
    return finish_output(y, inp, D, z, u.dtype, states)


def reference_states(u, delta, A, B, C, delta_bias, delta_softplus) -> torch.Tensor:
    """All states (batch, dim, n, L) float32 from the reference loop, without gradients:
    for backends whose kernels keep only some states (inspection, e.g. the coordinate check)."""
    with torch.no_grad():
        inp = ScanInputs.prepare(u, delta, A, B, C, delta_bias, delta_softplus)
        return scan_reference(inp, return_states=True)[1]
