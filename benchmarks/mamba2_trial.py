"""A Mamba-2 trial against a Mamba-1 trial of equal parameter count, on CPU, through run_trial.

    python benchmarks/mamba2_trial.py [--width 256] [--steps 60] [--repeats 2] [--threads 1]

Mamba-2 runs at --width (headdim 16, d_state 16, ngroups 1, chunk 64); Mamba-1 at the width
whose parameter count is closest to it (same n_layer, d_state, expand, data). Both use the
settings of sweeps/mamba2_width.yaml (2 layers, batch 8 × 64 tokens, AdamW, stdlib text).
Prints the parameter counts, each trial's wall time (median of --repeats, alternating the
two archs so that a change in machine load hits both) and the ratio; the target of issue 30
is a ratio ≤ 2.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.train import run_trial

MODEL = {"n_layer": 2, "d_state": 16, "base_width": 64}
MAMBA2 = {"arch": "mamba2", "mamba2": {"headdim": 16, "chunk_size": 64}}


def config(arch: dict, width: int, steps: int) -> TrialConfig:
    return TrialConfig(width=width, model={**MODEL, **arch},
                       train={"optimizer": "adamw", "lr": 1e-3, "steps": steps, "batch_size": 8,
                              "seq_len": 64, "eval_every": steps, "eval_batches": 2,
                              "device": "cpu"},
                       data={"source": "stdlib"})


def params(cfg: TrialConfig) -> int:
    return sum(p.numel() for p in build_model(cfg, load_data(cfg.data).spec).parameters())


def equal_width(target: int, start: int) -> int:
    """The Mamba-1 width whose parameter count is closest to `target`."""
    counts = {w: params(config({"arch": "mamba"}, w, 1)) for w in range(start - 24, start + 25)}
    return min(counts, key=lambda w: abs(counts[w] - target))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    m2 = config(MAMBA2, args.width, args.steps)
    n2 = params(m2)
    w1 = equal_width(n2, args.width)
    m1 = config({"arch": "mamba"}, w1, args.steps)
    n1 = params(m1)
    print(f"torch {torch.__version__}, {args.threads} thread(s), 2 layers, batch 8 x 64 tokens, "
          f"{args.steps} steps")
    print(f"mamba2 width {args.width}: {n2:,} params; mamba width {w1}: {n1:,} params "
          f"({100 * (n1 / n2 - 1):+.1f}%)")
    run_trial(config(MAMBA2, 64, 2))  # warm-up: data load, allocator
    times: dict[str, list[float]] = {"mamba2": [], "mamba": []}
    for _ in range(args.repeats):
        for name, cfg in (("mamba2", m2), ("mamba", m1)):
            t0 = time.perf_counter()
            run_trial(cfg)
            times[name].append(time.perf_counter() - t0)
    t2, t1 = statistics.median(times["mamba2"]), statistics.median(times["mamba"])
    for name, ts in times.items():
        print(f"{name:>7}: trial wall {statistics.median(ts):.2f} s (runs: "
              f"{', '.join(f'{t:.2f}' for t in ts)})")
    print(f"ratio mamba2 / mamba: {t2 / t1:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
