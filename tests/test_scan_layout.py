"""Mamba's mixer keeps its activations in the (batch, L, channels) layout its projections
produce: the scan gets views of those buffers, and a forward+backward makes two
activation-sized copies on the CPU (the torch conv's channels-first output, the split's
backward) and one with the triton conv (CUDA), not ten."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mutransfer.models.mamba as mamba
from mutransfer.models.mamba import MambaMixer

COPIES = {"copy_", "clone", "_to_copy", "cat", "constant_pad_nd"}


class CopyCounter(TorchDispatchMode):
    """Records the shape of every tensor a copying aten op writes."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in COPIES and isinstance(out, torch.Tensor):
            self.shapes.append(tuple(out.shape))
        return out


def stand_in_scan(calls):
    """Elementwise in every input, so it copies nothing itself; records what it was given."""
    def scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
             backend=None):
        calls.append(dict(u=u, delta=delta, B=B, C=C, z=z))
        return u * delta * z + (B * C).sum(1, keepdim=True) + D[:, None] + A.sum()
    return scan


def test_the_scan_reads_the_projections_buffers_through_views(monkeypatch):
    calls = []
    monkeypatch.setattr(mamba, "selective_scan", stand_in_scan(calls))
    mixer = MambaMixer(48, 16, d_state=8, n_layer=1)
    h = torch.randn(2, 10, 48)
    mixer(h)
    (c,) = calls
    for name in ("u", "delta", "B", "C", "z"):
        assert c[name].transpose(1, 2).stride(-1) == 1, name  # (b, L, ·) memory
    xz = mixer.in_proj(h)
    assert c["z"].untyped_storage().nbytes() == xz.untyped_storage().nbytes()  # a view of xz


def activation_sized_copies(batch: int = 2, L: int = 64) -> tuple[list, MambaMixer]:
    mixer = MambaMixer(48, 16, d_state=8, n_layer=1)
    h = torch.randn(batch, L, 48, requires_grad=True)
    with CopyCounter() as counter:
        mixer(h).sum().backward()
    activation = batch * L * mixer.d_inner
    return sorted(s for s in counter.shapes if torch.Size(s).numel() >= activation), mixer


def test_two_activation_sized_copies_per_layer_with_the_torch_conv(monkeypatch):
    monkeypatch.setattr(mamba, "selective_scan", stand_in_scan([]))
    big, mixer = activation_sized_copies()
    # the conv output made (b, L, d_inner); the backward of splitting xz into x and z
    assert big == [(2, 64, mixer.d_inner), (2, 64, 2 * mixer.d_inner)]


def test_one_with_a_conv_that_writes_the_channels_last_layout(monkeypatch):
    """What the triton conv does on CUDA: read the x half of xz in place, write (b, L, d)."""
    def conv(x, weight, bias):
        return torch.nn.functional.silu(x * weight[:, 0, -1] + bias)  # elementwise: no copy

    monkeypatch.setattr(mamba, "selective_scan", stand_in_scan([]))
    monkeypatch.setattr(mamba, "causal_conv1d_silu", conv)
    big, mixer = activation_sized_copies()
    assert big == [(2, 64, 2 * mixer.d_inner)]  # the split's backward only
