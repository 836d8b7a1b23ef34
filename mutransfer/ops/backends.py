"""The scan backends by name, and the one `mutransfer doctor` chose for a device: below both
the scan's entry point (scan.py, which asks for the choice) and the doctor's check (check.py,
which makes it).

The choice is remembered per device and library versions in `<user dir>/scan_backends.json`.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import torch

from mutransfer.configbase import user_dir

# backend name -> "module:function"; each function has the signature of selective_scan
BACKENDS: dict[str, str] = {
    "reference": "mutransfer.ops.reference:selective_scan_reference",
    "chunked": "mutransfer.ops.chunked:selective_scan_chunked",
    "triton": "mutransfer.ops.triton_scan:selective_scan_triton",
    # optional: state-spaces/mamba's CUDA kernels (the 'mamba' extra; benchmarks/README.md)
    "mamba_ssm": "mutransfer.ops.mamba_ssm_scan:selective_scan_mamba_ssm",
}
CHOICES = "scan_backends.json"
# the oldest triton that compiles the `triton` backend's kernels: 3.3 rejects tl.flip along
# any axis but the last (the adjoint's flipped scan along time); 3.4-3.6 and 3.9 compile them
# (python -m mutransfer.ops.triton_compile_check)
TRITON_MIN = (3, 4)


def triton_problem() -> str | None:
    """Why the `triton` backend cannot run in this install (not installed, or older than
    TRITON_MIN), or None when it can."""
    least = ".".join(map(str, TRITON_MIN))
    try:
        import triton
    except ImportError as exc:
        return f"the triton package is missing ({exc}): install 'mutransfer[triton]'"
    have = tuple(int(p) for p in re.findall(r"\d+", triton.__version__)[:2])
    if have < TRITON_MIN:
        return (f"triton {triton.__version__} cannot compile its kernels: install "
                f"triton>={least} (torch>=2.8 brings one)")
    return None


def load_backend(backend: str) -> Callable:
    """The scan function of a backend (importing its module; ValueError for an unknown name)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown scan backend {backend!r}; known: {', '.join(BACKENDS)}")
    module, func = BACKENDS[backend].split(":")
    return getattr(importlib.import_module(module), func)


def device_key(device: torch.device) -> str:
    """The device and the versions a choice holds for."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    versions = [f"torch {torch.__version__}"]
    for dist in ("triton", "mamba-ssm"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return f"{name} | {', '.join(versions)}"


def _choices(path: Path) -> dict[str, str]:
    """The choices file's mapping; {} when it is missing, unreadable, or not a JSON object
    (a `[]` there crashed every CUDA `auto` scan with an AttributeError)."""
    try:
        choices = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return choices if isinstance(choices, dict) else {}


def remember(device: torch.device, backend: str) -> str:
    """Write the choice for this device and versions; the file's path."""
    path = user_dir() / CHOICES
    choices = _choices(path)
    choices[device_key(device)] = backend
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(choices, indent=1, sort_keys=True))
    tmp.replace(path)
    return str(path)


def remembered(device: torch.device) -> str | None:
    """The backend `mutransfer doctor` chose for this device and versions, if it ran."""
    choice = _choices(user_dir() / CHOICES).get(device_key(device))
    return choice if isinstance(choice, str) else None
