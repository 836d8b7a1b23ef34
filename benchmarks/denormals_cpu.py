"""Subnormal floats on CPU: tokens/s of one trial at a low and a high LR, flushed and kept.

    python benchmarks/denormals_cpu.py [--width 256] [--steps 40] [--lrs 0.002 0.03125]
                                       [--repeats 2] [--threads 1]

The quickstart's model and training (sweeps/quickstart.yaml: 2 layers, d_state 16, AdamW,
batch 8 x 64, cosine with 6 warmup steps) under sp, run through the real trainer
(`run_trial`) with subnormals flushed to zero (what every trial does,
mutransfer/denormals.py) and kept (the trainer's call replaced by one that turns flushing
off), the two alternating so that a change in the machine's load hits both alike. Prints
tokens/s over the training steps (evaluation excluded, wall clock: what an idle machine
shows), tokens per CPU-second of the whole trial (this process's CPU time, evaluation
included: what a loaded machine still measures fairly) and the final eval loss of each; then
per LR the median of each mode, the ratio to the fastest LR's, and whether the flushed and
kept losses are equal bit for bit.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import mutransfer.train as train
from mutransfer.config import TrialConfig


def config(width: int, steps: int, lr: float) -> TrialConfig:
    return TrialConfig(width=width, model={"n_layer": 2, "d_state": 16, "base_width": 64},
                       param={"name": "sp"},
                       data={"source": "stdlib"},
                       train={"optimizer": "adamw", "lr": lr, "steps": steps, "batch_size": 8,
                              "seq_len": 64, "warmup": 6, "schedule": "cosine",
                              "eval_every": 20, "eval_batches": 2, "device": "cpu"})


def run(cfg: TrialConfig, flush: bool) -> train.TrialResult:
    # the trainer flushes at the start of every trial: keep subnormals by replacing that call
    train.flush_denormals = lambda: bool(torch.set_flush_denormal(flush))
    return train.run_trial(cfg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.002, 0.03125])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.backends.cpu.get_cpu_capability()}; sp width {args.width}, {args.steps} steps")
    run(config(args.width, 2, args.lrs[0]), True)  # warm-up: data load, allocator
    speed: dict[tuple[float, bool], list[float]] = {}
    per_cpu: dict[tuple[float, bool], list[float]] = {}
    loss: dict[tuple[float, bool], set] = {}
    print(f"{'lr':>9} {'subnormals':>10} {'tokens/s':>9} {'tokens/CPU-s':>12} "
          f"{'final eval loss':>18}")
    for _ in range(args.repeats):
        for lr in args.lrs:
            for flush in (False, True):
                cpu = time.process_time()
                r = run(config(args.width, args.steps, lr), flush)
                cpu = time.process_time() - cpu
                speed.setdefault((lr, flush), []).append(r.tokens_per_s)
                per_cpu.setdefault((lr, flush), []).append(r.tokens / cpu)
                loss.setdefault((lr, flush), set()).add(r.final_eval_loss)
                print(f"{lr:>9.5f} {'flushed' if flush else 'kept':>10} "
                      f"{r.tokens_per_s:>9,.0f} {r.tokens / cpu:>12,.0f} "
                      f"{r.final_eval_loss!r:>18}", flush=True)
    print("medians; how many times slower than the fastest LR in the same mode")
    for flush in (False, True):
        fastest = max(statistics.median(speed[(lr, flush)]) for lr in args.lrs)
        fastest_cpu = max(statistics.median(per_cpu[(lr, flush)]) for lr in args.lrs)
        for lr in args.lrs:
            m, c = statistics.median(speed[(lr, flush)]), statistics.median(per_cpu[(lr, flush)])
            print(f"  lr {lr:.5f} {'flushed' if flush else 'kept':>8}: {m:,.0f} tok/s "
                  f"({fastest / m:.2f}x), {c:,.0f} tok/CPU-s ({fastest_cpu / c:.2f}x)")
    for lr in args.lrs:
        same = loss[(lr, True)] == loss[(lr, False)]
        print(f"  lr {lr:.5f}: final eval loss flushed {sorted(loss[(lr, True)])} kept "
              f"{sorted(loss[(lr, False)])}: {'bit-identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
