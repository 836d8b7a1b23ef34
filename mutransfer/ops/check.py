"""Is a scan backend right and how fast is it, on this device: what `mutransfer doctor` runs.

Right: the output and the gradients of every input at a small shape (with D, z and the Δ
bias + softplus, as Mamba calls it) against the reference loop on float64 copies of the
inputs (its state is float32 whatever the inputs, as selective_scan_ref's), as relative
errors max|a - b| / max|b|. Fast: the median time of a forward + backward at a typical shape.
The fastest backend that passes is remembered per device and library versions
(mutransfer/ops/backends.py), and `auto` (mutransfer/ops/scan.py) uses it there.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from mutransfer.ops.backends import load_backend
from mutransfer.ops.reference import selective_scan_reference

SMALL = (2, 37, 6, 100)  # batch, channels, states, steps: odd sizes, more than one chunk
TYPICAL_CPU = (2, 256, 16, 512)
TYPICAL_CUDA = (8, 1536, 16, 1024)  # benchmarks/README.md's first scan shape
TOLERANCE = {torch.float32: (1e-4, 1e-3), torch.bfloat16: (3e-2, 5e-2)}  # output, gradients


@dataclass
class BackendCheck:
    backend: str
    ok: bool
    out_err: float = float("nan")
    grad_err: float = float("nan")
    ms: float = float("nan")  # forward + backward at the typical shape
    error: str = ""  # why it could not run (not installed, an exception)


def _inputs(shape, device, dtype, seed=0) -> dict[str, torch.Tensor]:
    b, d, n, L = shape
    g = torch.Generator().manual_seed(seed)

    def r(*s, scale=1.0):
        return (torch.randn(*s, generator=g) * scale).to(device)

    return {"u": r(b, d, L).to(dtype), "delta": r(b, d, L, scale=0.5).to(dtype),
            "A": -torch.rand(d, n, generator=g).add(0.5).to(device),
            "B": r(b, n, L).to(dtype), "C": r(b, n, L).to(dtype), "D": r(d),
            "z": r(b, d, L).to(dtype), "delta_bias": r(d, scale=0.5)}


def _run(fn, inputs: dict[str, torch.Tensor]):
    leaves = {k: v.detach().clone().requires_grad_(True) for k, v in inputs.items()}
    out = fn(**leaves, delta_softplus=True)
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
    grads = torch.autograd.grad((out.float() * weight).sum(), list(leaves.values()))
    return out, dict(zip(leaves, grads))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale else (a - b).abs().max().item()


def check_backend(backend: str, device: torch.device, dtype: torch.dtype = torch.float32,
                  typical: tuple[int, int, int, int] | None = None, repeats: int = 5
                  ) -> BackendCheck:
    """Accuracy at SMALL against the float64 reference, then the time at `typical`."""
    try:
        fn = load_backend(backend)
        inputs = _inputs(SMALL, device, dtype)
        out, grads = _run(fn, inputs)
        ref_in = {k: v.detach().cpu().double() for k, v in inputs.items()}
        ref_out, ref_grads = _run(selective_scan_reference, ref_in)
    except Exception as exc:  # not installed, no kernel for this device, a crash
        return BackendCheck(backend, False, error=str(exc).splitlines()[0][:200]
                            if str(exc) else type(exc).__name__)
    out_tol, grad_tol = TOLERANCE.get(dtype, TOLERANCE[torch.float32])
    out_err = rel_err(out, ref_out)
    grad_err = max(rel_err(grads[k], ref_grads[k]) for k in grads)
    ok = out_err < out_tol and grad_err < grad_tol
    check = BackendCheck(backend, ok, out_err, grad_err)
    if ok:
        check.ms = time_backend(fn, device, dtype, typical or (
            TYPICAL_CUDA if device.type == "cuda" else TYPICAL_CPU), repeats)
    return check


def time_backend(fn, device: torch.device, dtype: torch.dtype, shape, repeats: int) -> float:
    inputs = _inputs(shape, device, dtype)
    times = []
    for i in range(repeats + 1):  # the first call compiles / warms up
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        _run(fn, inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)

