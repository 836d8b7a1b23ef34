"""S4D-LegS is the reference's (state-spaces/s4, dplr.py with init `legs`): the diagonal part
of HiPPO-LegS's normal-plus-low-rank form for A *and* HiPPO-LegS's B in that eigenbasis.

The reference ignores its B_init for `legs` and takes B = V* B_LegS from hippo.py's `nplr`
(imaginary part clipped at ±2). A model built with `model.s4d.init: legs` gave B = 1 in every
mode (the B of S4D-Lin/Inv), so a sweep over `s4d.init` compared LegS's eigenvalues with the
wrong input vector: |B_n| was 1 where the reference's runs from 0.70 (slowest mode) to 2.0
(N = 16). These tests rebuild the reference's `nplr` step by step and compare.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model


def reference_nplr_legs(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, B) of state-spaces/s4's hippo.nplr('legs', N, B_clip=2.0): the N/2 eigenvalues of
    negative imaginary part of A + P Pᵀ and B = V* B_LegS, as its code computes them."""
    q = np.arange(n, dtype=np.float64)  # hippo.transition('legs', N)
    col, row = np.meshgrid(q, q)
    r = 2 * q + 1
    m = -(np.where(row >= col, r, 0) - np.diag(q))
    t = np.sqrt(np.diag(2 * q + 1))
    a = torch.as_tensor(t @ m @ np.linalg.inv(t))
    b = torch.as_tensor(np.diag(t).copy())
    p = torch.sqrt(0.5 + torch.arange(n, dtype=torch.float64)).unsqueeze(0)  # rank_correction
    ap = a + torch.sum(p.unsqueeze(-2) * p.unsqueeze(-1), dim=-3)
    w_re = torch.mean(torch.diagonal(ap), -1, keepdim=True)
    w_im, v = torch.linalg.eigh(ap * -1j)
    w = w_re + 1j * w_im
    _, idx = torch.sort(w.imag)
    v = v[:, idx][:, : n // 2]
    w = w[idx][: n // 2]
    bv = v.conj().transpose(-1, -2) @ b.to(v)
    bv = bv.real + 1j * torch.clamp(bv.imag, min=-2.0, max=2.0)
    return w, bv


def s4d_model(init: str, d_state: int):
    cfg = TrialConfig(width=64, model={"arch": "s4d", "n_layer": 2, "d_state": d_state,
                                       "base_width": 64, "s4d": {"init": init}},
                      train={"steps": 1, "batch_size": 2, "seq_len": 32, "eval_every": 1,
                             "eval_batches": 1, "device": "cpu"},
                      data={"source": "synthetic", "task": "memory"})
    return build_model(cfg, load_data(cfg.data).spec)


@pytest.mark.parametrize("d_state", [8, 16, 42, 64])
def test_legs_b_is_hippo_legs_b_in_the_eigenbasis_of_each_mode(d_state: int) -> None:
    """Each mode's (A_n, B_n) is a pair of the reference's (conjugated: the model keeps the
    half of each conjugate pair with Im A > 0, the reference the other), in every layer."""
    w, b_ref = reference_nplr_legs(d_state)
    for layer in s4d_model("legs", d_state).layers:
        mixer = layer.mixer
        a = torch.complex(mixer.A_re, mixer.A_im).detach().to(torch.complex128)
        b = mixer.B.value().detach().to(torch.complex128)
        for h in (0, mixer.channels - 1):
            for n in range(mixer.modes):
                match = int(torch.argmin((w.conj() - a[h, n]).abs()))
                assert abs(w.conj()[match] - a[h, n]) < 1e-4 * max(1.0, abs(a[h, n]))
                assert abs(b[h, n] - b_ref[match].conj()) < 1e-5, (h, n)


def test_legs_b_is_not_all_ones_and_the_other_inits_keep_ones() -> None:
    """The reference's B_init 'constant' (ones) stays for lin, inv and real."""
    b = s4d_model("legs", 16).layers[0].mixer.B.value().detach()
    assert b.abs().min() < 0.75 and b.abs().max() > 1.99
    for init in ("lin", "inv", "real"):
        b = s4d_model(init, 16).layers[0].mixer.B.value().detach()
        assert torch.equal(b, torch.ones_like(b))
