"""`selective_scan`: one entry point, backends chosen by name.

Shapes follow `selective_scan_ref` of state-spaces/mamba:
u, delta, z: (batch, dim, L); A: (dim, n); B, C: (batch, n, L); D, delta_bias: (dim,).
Returns out (batch, dim, L) in u's dtype, or (out, states) with states (batch, dim, n, L)
in float32 when `return_states` is set.
"""

from __future__ import annotations

import functools

import torch

from mutransfer.ops.backends import BACKENDS, load_backend, remembered, triton_problem

__all__ = ["BACKENDS", "default_backend", "selective_scan"]


def default_backend(device: torch.device | str) -> str:
    """What `auto` runs: on CUDA, the backend `mutransfer doctor` found fastest among those
    that passed its checks on this device with these library versions; else `triton` when it
    can run (installed, and new enough: backends.TRITON_MIN), else `chunked`. On CPU
    `chunked` (never the optional `mamba_ssm` unless the doctor chose it)."""
    device = torch.device(device)
    if device.type == "cuda":
        # the doctor's choice is keyed by the device's name: without CUDA (a CPU build of
        # torch, no driver) there is no device to have chosen for, and none to ask
        if torch.cuda.is_available():
            chosen = _remembered(device.index if device.index is not None else
                                 torch.cuda.current_device())
            if chosen is not None:
                return chosen
        return "chunked" if triton_problem() else "triton"
    return "chunked"


@functools.lru_cache(maxsize=8)
def _remembered(index: int) -> str | None:
    """Read once per process and device: `auto` is asked at every layer's forward."""
    choice = remembered(torch.device("cuda", index))
    return choice if choice in BACKENDS else None


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_states=False, backend: str | None = None):
    """Selective scan (Mamba S6). `backend=None` picks the device default."""
    fn = load_backend(backend or default_backend(u.device))
    return fn(u, delta, A, B, C, D=D, z=z, delta_bias=delta_bias,
              delta_softplus=delta_softplus, return_states=return_states)
