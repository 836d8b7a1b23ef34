"""Dense real stores for the lr* benchmark (benchmarks/real_curves.py): quarter-octave LRs,
8 seeds, sp and mup_ssm, three widths, two model shapes, trained on this machine.

Each trial is built and written the way a sweep builds and writes it (the sweep file's plan
expanded by mutransfer.sweep.plan.cells, each cell run by
mutransfer.sweep.run.trainable.run_unit, the trainer in-process, no Ray), so `analyze(STORE)`
reads it as any sweep's store. Resumable: a trial the store already holds is skipped, so the
script can run in chunks.

Two phases per shape:
  pilot  half-octave LRs over a wide range, seeds 0-1, to find each (param, width) optimum;
  dense  quarter-octave LRs, +-WINDOW octaves around that optimum, seeds 0-7. The pilot's
         trials that fall on the dense grid are the same trials (same config, same id).

  nice -n 5 python benchmarks/real_curves_store.py --root STORES \
      --shapes A B C --workers 2

Shapes: A = the quickstart's model (n_layer 2, d_state 16, 60 steps, batch 8 x 64, cosine,
warmup 6, stdlib text) at base width 32; B = the same with n_layer 1 and 30 steps (a third
of A's cost: another shape and another length); C = n_layer 1 at 60 steps, widths 16/32/64
(base 16), dense window +-2.75 octaves so that the one-octave five-point grids hold the
optimum >= 1 octave inside at every offset. `--window W` widens a shape's dense window
(B was made at 1.5; rerun with 2.5 to add LRs at both ends: the trials it holds are kept).
The held-out store D of benchmarks/README.md is shape A made with `--window 2.75`.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import numpy as np

from mutransfer.results.schema import axis_types
from mutransfer.results.store import Store
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.run.trainable import TrialUnit, run_unit

WIDTHS = {"A": (32, 64, 128), "B": (32, 64, 128), "C": (16, 32, 64)}
PARAMS = ("sp", "mup_ssm")
PILOT_SEEDS = (0, 1)
DENSE_SEEDS = tuple(range(8))
# octaves each side of the pilot's optimum on the dense grid
WINDOW = {"A": 1.5, "B": 1.5, "C": 2.75}
PILOT_LOG2 = {"sp": (-9.0, -3.0), "mup_ssm": (-8.0, -2.0)}

BASE: dict[str, Any] = {
    "train": {"optimizer": "adamw", "steps": 60, "batch_size": 8, "seq_len": 64, "warmup": 6,
              "schedule": "cosine", "eval_every": 20, "eval_batches": 2},
    "data": {"source": "stdlib"},
}
SHAPES: dict[str, dict[str, Any]] = {
    "A": {"model": {"arch": "mamba", "n_layer": 2, "d_state": 16, "base_width": 32}},
    "B": {"model": {"arch": "mamba", "n_layer": 1, "d_state": 16, "base_width": 32},
          "train": {**BASE["train"], "steps": 30}},
    "C": {"model": {"arch": "mamba", "n_layer": 1, "d_state": 16, "base_width": 16}},
}


def units(shape: str, param: str, width: int, log2s: list[float],
          seeds: tuple[int, ...]) -> list[TrialUnit]:
    """The sweep's units of one (param, width) at these LRs and seeds."""
    spec = SweepSpec.model_validate({
        "name": f"real_{shape}", **BASE, **SHAPES[shape],
        "axes": {"width": [width], "parameterization": [param],
                 "lr": [float(2.0 ** x) for x in log2s], "seed": list(seeds)},
        "resources": {"cpus_per_trial": 1, "gpus_per_trial": 0}})
    plan = build_plan(spec, source=f"real_{shape}")
    axes = axis_types(c.columns for c in plan.cells)
    return [TrialUnit(c.config, c.columns, c.trial_id, "grid", axes) for c in plan.cells]


def _init() -> None:
    import torch

    torch.set_num_threads(1)


def _run(job: tuple[TrialUnit, str, str]) -> float:
    unit, store, sweep = job
    start = time.perf_counter()
    run_unit(unit, store, sweep)
    return time.perf_counter() - start


def run_all(jobs: list[TrialUnit], store: str, sweep: str, workers: int, log: str) -> None:
    todo = [u for u in jobs if Store(store).finished_row(u.trial_id) is None]
    print(f"{log}: {len(jobs)} trials, {len(todo)} to run", flush=True)
    if not todo:
        return
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(workers, initializer=_init) as pool:
        for i, wall in enumerate(pool.imap_unordered(
                _run, [(u, store, sweep) for u in todo]), 1):
            if i % 20 == 0 or i == len(todo):
                print(f"  {i}/{len(todo)} done, last {wall:.1f} s, "
                      f"{time.perf_counter() - start:.0f} s so far", flush=True)


def half_octaves(lo: float, hi: float) -> list[float]:
    return [lo + 0.5 * k for k in range(int(round((hi - lo) / 0.5)) + 1)]


def pilot_optimum(store: str, param: str, width: int) -> float:
    """log2 of the pilot's optimum: the lowest mean final loss over the pilot's seeds and
    LRs only (so that a store the dense phase has filled gives the same centre again), on a
    3-point running mean, rounded to a quarter octave."""
    trials = Store(store).tables().trials
    pilot = {float(2.0 ** x) for x in half_octaves(*PILOT_LOG2[param])}
    sel = trials[(trials["parameterization"] == param) & (trials["width"] == width)
                 & trials["seed"].isin(PILOT_SEEDS) & trials["lr"].isin(pilot)]
    means = sel.groupby("lr")["final_eval_loss"].mean()
    x = np.log2(means.index.to_numpy(float))
    y = means.to_numpy(float)
    y = np.where(np.isfinite(y), y, np.nanmax(y[np.isfinite(y)]) + 1.0)
    smooth = np.convolve(np.pad(y, 1, mode="edge"), np.ones(3) / 3, mode="valid")
    return math.floor(x[int(np.argmin(smooth))] * 4 + 0.5) / 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--shapes", nargs="+", default=["A", "B"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=len(DENSE_SEEDS))
    ap.add_argument("--window", type=float, default=None,
                    help="octaves each side of the pilot optimum (default: the shape's)")
    args = ap.parse_args()
    for shape in args.shapes:
        store = str(Path(args.root) / f"real_{shape}")
        Store(store).ensure_writable()
        window = WINDOW[shape] if args.window is None else args.window
        pilot = [u for p in PARAMS for w in WIDTHS[shape]
                 for u in units(shape, p, w, half_octaves(*PILOT_LOG2[p]), PILOT_SEEDS)]
        run_all(pilot, store, f"real_{shape}", args.workers, f"shape {shape} pilot")
        for p in PARAMS:
            for w in WIDTHS[shape]:
                centre = pilot_optimum(store, p, w)
                lo, hi = centre - window, centre + window
                grid = [lo + 0.25 * k for k in range(int(round((hi - lo) * 4)) + 1)]
                print(f"shape {shape} {p} w{w}: pilot optimum 2^{centre:.2f}, dense "
                      f"2^{lo:.2f}..2^{hi:.2f}", flush=True)
                run_all(units(shape, p, w, grid, DENSE_SEEDS[:args.seeds]), store,
                        f"real_{shape}", args.workers, f"shape {shape} {p} w{w} dense")


if __name__ == "__main__":
    main()
