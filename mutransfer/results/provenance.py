"""Where a result came from, beyond the versions: the environment a trial ran in.

Floating-point results of the same code and data differ bit for bit between machines when
the reductions run in another order: torch's intra-op thread count, the CPU's vector unit
(ATen and oneDNN pick AVX2 or AVX-512 kernels at run time), the BLAS; and where subnormal
floats are kept or flushed to zero (mutransfer/denormals.py). A trial records them (the
`env` column) so that two runs that disagree can be told apart. Read from torch only
when the process has imported it already (a trial has): this module imports no torch.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def environment() -> dict[str, Any]:
    """Python, platform, CPU, thread settings, numpy; torch's threads, CPU kernels and CUDA
    device when torch is loaded."""
    env: dict[str, Any] = {
        "python": platform.python_version(), "platform": platform.platform(),
        "cpu": cpu_model(), "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        **{v: os.environ.get(v) for v in THREAD_VARIABLES}}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        env["numpy"] = numpy.__version__
    torch = sys.modules.get("torch")
    if torch is not None:
        env.update(_torch(torch))
    return env


def _torch(torch: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"torch": torch.__version__,
                             "torch_threads": torch.get_num_threads(),
                             "torch_interop_threads": torch.get_num_interop_threads()}
    try:
        found["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:  # older torch
        pass
    found["mkl"] = bool(torch.backends.mkl.is_available())
    found["flush_denormal"] = flushes_denormals(torch)
    found["cuda"] = torch.version.cuda
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        found["gpu"] = torch.cuda.get_device_name()
    return found


# ATen splits an elementwise op into chunks of at least this many elements, one per thread
_GRAIN = 32768


def flushes_denormals(torch: Any) -> bool:
    """Whether a product that underflows into the subnormal range comes out 0 in every
    intra-op thread at the current thread count (mutransfer/denormals.py): a probe, as
    torch has no getter for the setting and each thread holds its own."""
    n = _GRAIN * max(1, torch.get_num_threads())
    tiny = torch.full((n,), 1e-30, dtype=torch.float32) * 1e-10  # 1e-40: subnormal
    return bool((tiny == 0).all())


def environment_json() -> str:
    return json.dumps(environment(), sort_keys=True)


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the mutransfer checkout this process runs (with `+` when its tracked
    files have changes), or None outside a git checkout."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
