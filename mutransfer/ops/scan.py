"""`selective_scan`: one entry point, backends chosen by name.

Shapes follow `selective_scan_ref` of state-spaces/mamba:
u, delta, z: (batch, dim, L); A: (dim, n); B, C: (batch, n, L); D, delta_bias: (dim,).
Returns out (batch, dim, L) in u's dtype, or (out, states) with states (batch, dim, n, L)
in float32 when `return_states` is set.
"""

from __future__ import annotations

import importlib

import torch

# backend name -> "module:function"; each function has the signature of selective_scan
BACKENDS: dict[str, str] = {
    "reference": "mutransfer.ops.reference:selective_scan_reference",
    "chunked": "mutransfer.ops.chunked:selective_scan_chunked",
    "triton": "mutransfer.ops.triton_scan:selective_scan_triton",
    # optional: state-spaces/mamba's CUDA kernels (the 'mamba' extra; benchmarks/README.md)
    "mamba_ssm": "mutransfer.ops.mamba_ssm_scan:selective_scan_mamba_ssm",
}


def _load(backend: str):
    if backend not in BACKENDS:
        raise ValueError(f"unknown scan backend {backend!r}; known: {', '.join(BACKENDS)}")
    module, func = BACKENDS[backend].split(":")
    return getattr(importlib.import_module(module), func)


def default_backend(device: torch.device | str) -> str:
    """`triton` on CUDA when it imports, else `chunked` (never the optional `mamba_ssm`)."""
    if torch.device(device).type == "cuda":
        try:
            import triton  # noqa: F401

            return "triton"
        except ImportError:
            return "chunked"
    return "chunked"


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
                   return_states=False, backend: str | None = None):
    """Selective scan (Mamba S6). `backend=None` picks the device default."""
    fn = _load(backend or default_backend(u.device))
    return fn(u, delta, A, B, C, D=D, z=z, delta_bias=delta_bias,
              delta_softplus=delta_softplus, return_states=return_states)
