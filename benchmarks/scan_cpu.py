"""Forward+backward time of the selective-scan backends on CPU, as a small table.

    python benchmarks/scan_cpu.py [--repeats 3] [--lengths 256 1024 4096] [--skip-reference-above L]

Shapes as a Mamba layer calls the scan: batch 4, dim 256, state 16, with D, z, Δ bias and
softplus. Each cell is the median wall time of `--repeats` runs after `--warmup` runs;
the backends alternate run by run. Timings on a shared machine are noisy: the load average
is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from mutransfer.ops.scan import selective_scan

BACKENDS = ("reference", "chunked")


def make_inputs(batch: int, dim: int, n: int, length: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    inputs = {
        "u": torch.randn(batch, dim, length, generator=g),
        "delta": torch.randn(batch, dim, length, generator=g),
        "A": -torch.rand(dim, n, generator=g) * 4 - 0.1,
        "B": torch.randn(batch, n, length, generator=g),
        "C": torch.randn(batch, n, length, generator=g),
        "D": torch.randn(dim, generator=g),
        "z": torch.randn(batch, dim, length, generator=g),
        "delta_bias": torch.rand(dim, generator=g) - 0.5,
    }
    return {k: v.requires_grad_() for k, v in inputs.items()}


def fwd_bwd(backend: str, inputs: dict, weight: torch.Tensor) -> None:
    """One forward and one backward to every input."""
    out = selective_scan(**inputs, delta_softplus=True, backend=backend)
    torch.autograd.grad((out * weight).sum(), list(inputs.values()))


def median_ms(fns: dict[str, Callable[[], None]], warmup: int, repeats: int) -> dict[str, float]:
    """Median wall ms per function; runs interleaved so a shared machine's load hits all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="timed runs per cell (median)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs before timing")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--state", type=int, default=16)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="torch.set_num_threads (default: all cores)")
    p.add_argument("--skip-reference-above", type=int, default=None, metavar="L",
                   help="do not time the slow reference for sequence lengths above L")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.1f}; batch {args.batch}, dim {args.dim}, state {args.state}; "
          f"median of {args.repeats} after {args.warmup} warm-up; forward+backward ms")
    print(f"{'L':>6} {'reference':>11} {'chunked':>9} {'speed-up':>9}")
    for length in args.lengths:
        inputs = make_inputs(args.batch, args.dim, args.state, length)
        weight = torch.randn(args.batch, args.dim, length)
        skip = args.skip_reference_above is not None and length > args.skip_reference_above
        fns = {b: partial(fwd_bwd, b, inputs, weight) for b in BACKENDS
               if not (b == "reference" and skip)}
        ms = median_ms(fns, args.warmup, args.repeats)
        ref = f"{ms['reference']:11.1f}" if "reference" in ms else f"{'skipped':>11}"
        speedup = f"{ms['reference'] / ms['chunked']:8.1f}x" if "reference" in ms else f"{'-':>9}"
        print(f"{length:>6} {ref} {ms['chunked']:9.1f} {speedup}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
