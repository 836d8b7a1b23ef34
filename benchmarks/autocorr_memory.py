"""Memory and time of the `toeplitz` λ_max estimate (dt_init autocorr) on a model-sized input.

The estimate reads the SSM input of a layer on the init sample: SAMPLE_SIZE sequences x
d_inner channels as rows of length L. Prints the process's peak RSS above the input itself
and the wall time, for rows of white noise of that size.

    python benchmarks/autocorr_memory.py --width 1024 --seq-len 2048
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutransfer.init import autocorr  # noqa: E402
from mutransfer.models.data_init import SAMPLE_SIZE  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1024, help="d_model (d_inner = 2 x width)")
    parser.add_argument("--seq-len", type=int, default=2048)
    args = parser.parse_args()
    rows = SAMPLE_SIZE * 2 * args.width
    x = torch.randn(rows, args.seq_len, generator=torch.Generator().manual_seed(0))
    before = peak_rss_mib()
    start = time.perf_counter()
    lam = autocorr.lambda_max(x)
    seconds = time.perf_counter() - start
    print(f"rows {rows} x L {args.seq_len} (input {x.numel() * 4 / 2**20:.0f} MiB): "
          f"lambda_max {lam:.4f}, peak RSS +{peak_rss_mib() - before:.0f} MiB, {seconds:.1f} s")


if __name__ == "__main__":
    main()
