"""The chunked SSD scan in pure PyTorch (Mamba-2's state-space duality, Dao & Gu, ICML 2024).

The four steps of state-spaces/mamba's `ssd_minimal_discrete` and of the chunk-scan reference
in `mamba_ssm/ops/triton/ssd_combined.py` (`ssd_chunk_scan_combined_ref`), on the inputs of
`ssd_reference.py` (X = x·Δ, a = A·Δ, B and C per group):

1. within each chunk of Q steps, the quadratic (attention-like) form: Y_diag;
2. each chunk's final state from its own inputs (the B terms);
3. the states entering each chunk, by the recurrence across chunks (the A terms);
4. each chunk's output from the state entering it (the C terms): Y_off.

Differences from the reference, on purpose:
- groups are kept as a dimension (heads = groups × heads per group) instead of repeating B
  and C for every head, so the C·B products are computed once per group;
- step 3 is a loop over the chunks (L/Q of them; a handful at the sequence lengths this
  project trains), where the reference uses a second (chunks+1)² segment-sum matrix;
- the decay from a step to its chunk's end is a sum from the end (the reference takes the
  difference of two cumulative sums, which loses the small decays after a large one);
- a length that is not a multiple of Q is zero-padded at the end (a = 0, X = 0 there: the
  causal outputs of the real steps do not see the padding), and the padding cut off.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mutransfer.ops.ssd_reference import segsum


def ssd_chunked(X, a, B, C, chunk_size: int = 64):
    """Y (batch, L, heads, headdim) from X (b, L, h, p), a (b, L, h), B, C (b, L, g, n)."""
    b, L, H, P = X.shape
    G, N = B.shape[2], B.shape[3]
    if H % G:
        raise ValueError(f"{G} groups do not divide {H} heads")
    R, Q = H // G, min(chunk_size, L)
    pad = (-L) % Q
    if pad:
        X = F.pad(X, (0, 0, 0, 0, 0, pad))
        a = F.pad(a, (0, 0, 0, pad))
        B = F.pad(B, (0, 0, 0, 0, 0, pad))
        C = F.pad(C, (0, 0, 0, 0, 0, pad))
    c = (L + pad) // Q
    Xc = X.reshape(b, c, Q, G, R, P)
    Bc, Cc = B.reshape(b, c, Q, G, N), C.reshape(b, c, Q, G, N)
    ac = a.reshape(b, c, Q, G, R).permute(0, 3, 4, 1, 2)  # (b, g, r, c, Q)
    a_cum = torch.cumsum(ac, dim=-1)

    # 1. within chunks: Y_t = Σ_{s≤t} (C_t·B_s) exp(a_{s+1} + ... + a_t) X_s
    scores = torch.einsum("bclgn,bcsgn->bgcls", Cc, Bc)[:, :, None] * torch.exp(segsum(ac))
    y = torch.einsum("bgrcls,bcsgrp->bclgrp", scores, Xc)

    # 2. each chunk's own final state: Σ_s exp(a_{s+1} + ... + a_Q) X_s ⊗ B_s, the exponent a
    # sum from the end of the chunk, not a_cum[Q] - a_cum[s]: that difference cancels (one
    # very negative a early in the chunk leaves no bits for the small ones after it) and is
    # NaN once a_cum reaches -inf
    to_end = torch.flip(torch.cumsum(torch.flip(ac[..., 1:], (-1,)), -1), (-1,))
    to_end = torch.exp(F.pad(to_end, (0, 1))).permute(0, 3, 4, 1, 2)  # (b, c, Q, g, r)
    own = torch.einsum("bclgn,bclgrp->bcgrpn", Bc, Xc * to_end[..., None])

    # 3. the state entering each chunk: S_0 = 0, S_{k+1} = exp(Σ a over chunk k) S_k + own_k
    chunk_decay = torch.exp(a_cum[..., -1]).permute(0, 3, 1, 2)  # (b, c, g, r)
    entering, state = [], torch.zeros_like(own[:, 0])
    for k in range(c):
        entering.append(state)
        state = chunk_decay[:, k, :, :, None, None] * state + own[:, k]
    S = torch.stack(entering, dim=1)  # (b, c, g, r, p, n)

    # 4. the entering state's contribution: exp(a_1 + ... + a_t) C_t · S
    from_start = torch.exp(a_cum).permute(0, 3, 4, 1, 2)  # (b, c, Q, g, r)
    y = y + torch.einsum("bclgn,bcgrpn->bclgrp", Cc, S) * from_start[..., None]
    return y.reshape(b, c * Q, H, P)[:, :L]
