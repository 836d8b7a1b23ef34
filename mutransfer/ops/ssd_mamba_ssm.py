"""The `mamba_ssm` SSD backend: state-spaces/mamba's `mamba_chunk_scan_combined` (Triton).

Optional, CUDA only, never picked by `auto`: the mamba-ssm package (the 'mamba' extra, see
ops/mamba_ssm_scan.py for the install). Without it, or on another device, choosing this
backend is a one-line UserError. Its arguments are this project's `ssd_scan` arguments one to
one (x (b, L, h, p), dt (b, L, h), A (h,), B and C (b, L, g, n), D (h,), dt_bias (h,)).
"""

from __future__ import annotations

import importlib

from mutransfer.errors import UserError
from mutransfer.ops.mamba_ssm_scan import INSTALL, as_float32, check_device


def load_chunk_scan():
    """mamba_ssm's mamba_chunk_scan_combined, or a one-line UserError saying how to install."""
    try:
        module = importlib.import_module("mamba_ssm.ops.triton.ssd_combined")
    except ImportError as exc:
        raise UserError(f"{INSTALL} (import failed: {exc})") from exc
    return module.mamba_chunk_scan_combined


def ssd_mamba_ssm(x, dt, A, B, C, D=None, dt_bias=None, dt_softplus=True, chunk_size=64):
    """y (b, L, h, p) by mamba_ssm's fused chunk scan."""
    scan = load_chunk_scan()
    check_device(x.device)
    return scan(x, dt, as_float32(A), B, C, chunk_size, D=as_float32(D),
                dt_bias=as_float32(dt_bias), dt_softplus=bool(dt_softplus))
