"""The `mamba_ssm` scan backend: state-spaces/mamba's CUDA `selective_scan_fn`, if installed.

Optional: `MAMBA_KEEP_CUDA_BUILD=TRUE pip install --no-build-isolation 'mutransfer[mamba]'`
builds the mamba-ssm package with its CUDA extension (`selective_scan_cuda`; mamba-ssm 2.3
builds it only when MAMBA_KEEP_CUDA_BUILD=TRUE), which needs nvcc and a CUDA build of torch.
Without it, choosing this backend is a UserError naming the install. `auto` never picks it.

The arguments map one to one (mamba_ssm's layouts are this project's: u, Δ, z (batch, dim, L);
A (dim, n); B, C (batch, n, L); D and the Δ bias (dim,)). mamba_ssm copies any of u, Δ, z,
B, C and dout whose last stride is not 1 (Mamba's (batch, L, channels) views are such) and
wants A, D and the Δ bias in float32. Its last-state output is not used; `return_states`
takes all states from the reference loop, as the triton backend does.
"""

from __future__ import annotations

import importlib

import torch

from mutransfer.errors import UserError
from mutransfer.ops.common import check_shapes
from mutransfer.ops.reference import reference_states

INSTALL = ("scan backend 'mamba_ssm' needs the mamba-ssm package with its CUDA extension: "
           "MAMBA_KEEP_CUDA_BUILD=TRUE pip install --no-build-isolation 'mutransfer[mamba]' on "
           "a machine with CUDA and nvcc (it compiles CUDA code), or use scan backend 'auto'")


def load_selective_scan_fn():
    """mamba_ssm's selective_scan_fn, or a one-line UserError saying how to install it."""
    try:
        module = importlib.import_module("mamba_ssm.ops.selective_scan_interface")
    except ImportError as exc:
        raise UserError(f"{INSTALL} (import failed: {exc})") from exc
    if getattr(module, "selective_scan_cuda", None) is None:
        raise UserError(f"{INSTALL} (mamba_ssm is installed without selective_scan_cuda)")
    return module.selective_scan_fn


def check_device(device: torch.device) -> None:
    if device.type != "cuda":
        raise UserError(f"scan backend 'mamba_ssm' needs CUDA tensors (got {device.type}); "
                        "use scan backend 'auto' on the CPU")


def as_float32(t: torch.Tensor | None) -> torch.Tensor | None:
    """mamba_ssm's kernels want A, D and the Δ bias in float32."""
    return None if t is None else t.float()


def selective_scan_mamba_ssm(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                             delta_softplus=False, return_states=False):
    """Selective scan by mamba_ssm's CUDA kernels, with the signature of `selective_scan`."""
    scan = load_selective_scan_fn()
    check_device(u.device)
    check_shapes(u, delta, A, B, C, D, z, delta_bias)
    out = scan(u, delta, as_float32(A), B, C, D=as_float32(D), z=z,
               delta_bias=as_float32(delta_bias), delta_softplus=bool(delta_softplus))
    if return_states:
        return out, reference_states(u, delta, A, B, C, delta_bias, delta_softplus)
    return out
