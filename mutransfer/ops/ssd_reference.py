"""The two reference forms of the SSD scan (Mamba-2), against which the chunked one is tested.

Both take the discretised inputs of `ssd_minimal_discrete` in state-spaces/mamba
(`mamba_ssm/modules/ssd_minimal.py`, Listing 1 of Dao & Gu, ICML 2024):
    X: (batch, L, heads, headdim) = x · Δ;  a: (batch, L, heads) = A · Δ (log decay, ≤ 0);
    B, C: (batch, L, groups, d_state), head h reading group h // (heads / groups).
Returns Y (batch, L, heads, headdim), and with `return_states` the states
(batch, heads, headdim, d_state, L) after each step.

- `ssd_sequential`: the recurrence h_t = exp(a_t)·h_{t-1} + X_t ⊗ B_t, y_t = h_t · C_t.
- `ssd_quadratic`: the materialised SSD matrix ("attention" form, ssd_minimal with one block
  spanning the whole sequence): y_t = Σ_{s≤t} (C_t · B_s) · exp(Σ_{s<k≤t} a_k) · X_s,
  with the segment sums taken as in ssd_minimal's stable `segsum` (a cumulative sum of the
  masked a, not a difference of two cumulative sums).
"""

from __future__ import annotations

import torch


def heads_of_groups(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(batch, L, groups, n) -> (batch, L, heads, n): each group repeated for its heads."""
    groups = t.shape[2]
    if heads % groups:
        raise ValueError(f"{groups} groups do not divide {heads} heads")
    return t.repeat_interleave(heads // groups, dim=2)


def segsum(a: torch.Tensor) -> torch.Tensor:
    """(..., T) -> (..., T, T): out[i, j] = a[j+1] + ... + a[i] for i ≥ j, -inf above."""
    T = a.shape[-1]
    x = a[..., None].expand(*a.shape, T)  # x[..., i, j] = a[i]
    below = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device), diagonal=-1)
    x = x.masked_fill(~below, 0.0)
    out = torch.cumsum(x, dim=-2)
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=a.device))
    return out.masked_fill(~keep, float("-inf"))


def ssd_quadratic(X, a, B, C):
    """Y by the materialised L×L SSD matrix."""
    heads = X.shape[2]
    Bh, Ch = heads_of_groups(B, heads), heads_of_groups(C, heads)
    decay = torch.exp(segsum(a.transpose(1, 2)))  # (b, h, t, s)
    scores = torch.einsum("bthn,bshn->bhts", Ch, Bh) * decay
    return torch.einsum("bhts,bshp->bthp", scores, X)


def ssd_sequential(X, a, B, C, return_states: bool = False):
    """Y by the step-by-step recurrence (and every state when asked)."""
    b, L, heads, p = X.shape
    Bh, Ch = heads_of_groups(B, heads), heads_of_groups(C, heads)
    h = X.new_zeros(b, heads, p, Bh.shape[-1])
    ys, states = [], []
    for t in range(L):
        h = torch.exp(a[:, t])[:, :, None, None] * h + X[:, t, :, :, None] * Bh[:, t, :, None, :]
        ys.append(torch.einsum("bhpn,bhn->bhp", h, Ch[:, t]))
        if return_states:
            states.append(h)
    y = torch.stack(ys, dim=1)
    return (y, torch.stack(states, dim=-1)) if return_states else y
