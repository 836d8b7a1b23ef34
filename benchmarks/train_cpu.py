"""Training throughput on CPU: tokens/s of a 3-block Mamba at widths 128 and 256.

    python benchmarks/train_cpu.py [--steps 10] [--widths 128 256]

Runs the real trainer (`run_trial`) on the built-in corpus, seq_len 256, batch 8, and reports
tokens/s over the training steps (evaluation excluded), after one warm-up trial.
"""

from __future__ import annotations

import argparse
import time

import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.train import run_trial


def config(width: int, steps: int, backend: str) -> TrialConfig:
    return TrialConfig(width=width, model={"n_layer": 3, "base_width": 64,
                                           "scan_backend": backend},
                       train={"optimizer": "adamw", "lr": 1e-3, "steps": steps,
                              "batch_size": 8, "seq_len": 256, "eval_every": steps,
                              "eval_batches": 1, "device": "cpu"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"3 layers, seq_len 256, batch 8, backend {args.backend}")
    run_trial(config(args.widths[0], 2, args.backend))  # warm-up: data load, allocator
    print(f"{'width':>6} {'params':>10} {'tokens/s':>10} {'s/step':>8}")
    for width in args.widths:
        cfg = config(width, args.steps, args.backend)
        t0 = time.perf_counter()
        r = run_trial(cfg)
        n_params = sum(p.numel() for p in build_model(cfg, load_data(cfg.data).spec).parameters())
        print(f"{width:>6} {n_params:>10,} {r.tokens_per_s:>10,.0f} "
              f"{8 * 256 / r.tokens_per_s:>8.2f}   (trial wall {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
