"""Does a fraction of zero real parts help S4D on a long polynomial memory? (Liu & Li 2025)

    python benchmarks/zero_real.py                      # p = 0 vs 0.1, 3 seeds, a few minutes
    python benchmarks/zero_real.py --fractions 0 0.05 0.1 0.2 --steps 500

Trains an S4D model with `run_trial` on the synthetic memory task with rho(k) = (k+1)^-1 at
L = 1024 (targets normalised to unit variance: predicting 0 scores 1.0), once per (fraction,
seed), and prints the final and best eval loss per run and their mean per fraction. Δ comes
from the autocorrelation rule (`dt_init: autocorr`) in every arm, so only p changes.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mutransfer.config import TrialConfig
from mutransfer.train import run_trial


def config(args, fraction: float, seed: int) -> TrialConfig:
    return TrialConfig(
        width=args.width,
        model={"arch": "s4d", "n_layer": args.n_layer, "d_state": args.d_state,
               "base_width": args.width, "zero_real_fraction": fraction,
               "dt_init": {"scheme": args.dt_init}},
        data={"source": "synthetic", "task": "memory", "rho": "poly", "power": args.power},
        train={"optimizer": "adamw", "lr": args.lr, "steps": args.steps, "batch_size": 8,
               "seq_len": args.seq_len, "eval_every": args.steps, "eval_batches": 8,
               "seed": seed})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fractions", type=float, nargs="+", default=[0.0, 0.1])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--d-state", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--power", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dt-init", choices=("autocorr", "log_uniform"), default="autocorr")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    print(f"S4D width {args.width}, {args.n_layer} layers, d_state {args.d_state}; memory "
          f"rho (k+1)^-{args.power:g}, L {args.seq_len}; adamw lr {args.lr:g}, {args.steps} "
          f"steps, batch 8; dt_init {args.dt_init}")
    print(f"{'p':>5} {'seed':>4} {'initial':>8} {'final':>8} {'best':>8} {'time_s':>7}")
    finals: dict[float, list[float]] = {}
    for fraction in args.fractions:
        for seed in args.seeds:
            start = time.perf_counter()
            r = run_trial(config(args, fraction, seed))
            finals.setdefault(fraction, []).append(r.final_eval_loss)
            print(f"{fraction:>5g} {seed:>4} {r.initial_loss:>8.4f} {r.final_eval_loss:>8.4f} "
                  f"{r.best_eval_loss:>8.4f} {time.perf_counter() - start:>7.1f}"
                  f"{'  diverged' if r.diverged else ''}", flush=True)
    print("mean final eval loss over seeds:")
    for fraction, values in finals.items():
        spread = statistics.stdev(values) if len(values) > 1 else float("nan")
        print(f"  p = {fraction:g}: {statistics.mean(values):.4f} (sd {spread:.4f})")


if __name__ == "__main__":
    main()
