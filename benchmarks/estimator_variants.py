"""Run a benchmark under a variant of the lr* estimator: a local noise model, equal weights,
a narrower window. The comparison of issue 29 item 3 (can lr* be read locally, so that a
search running part of the grid reproduces the grid's lr*, without losing its grid-placement
stability on real curves?).

    python benchmarks/estimator_variants.py [--local [--offsets]] [--flat] [--narrow STEPS MIN] \
        SCRIPT.py [SCRIPT's arguments...]

SCRIPT is a benchmark of this folder that reads lr* through mutransfer.analysis
(real_curves.py, search_targets.py, search_floor.py). The variants, any combination:
  --local   the per-LR noise model (pointnoise.smooth_model, whose two slopes set every LR's
            weight) fitted from the LRs inside the window only, the window's LR set refitted
            until it stops changing: an LR outside the window cannot move lr*. On main the
            model is fitted over every LR that trained.
  --offsets with --local, also the seeds' offsets behind that scatter (cells.seed_offsets, on
            main fitted over every LR) from the window's LRs: only then does an LR outside
            the window move nothing (benchmarks/search_floor.py's zero-weight column 0.00).
  --flat    every LR weighs alike in lr*'s fit (its interval keeps the noise model).
  --narrow  WINDOW_STEPS grid steps, at least MIN octaves (main: 5 steps, at least 2.5), for
            the analysis and for the search's own decisions alike.
Without a flag the script runs as on main. The figures of the comparison are in
benchmarks/README.md "A local lr* estimator".
"""

from __future__ import annotations

import argparse
import dataclasses
import runpy
import sys
from pathlib import Path

import numpy as np

import mutransfer.analysis.fit as fit
import mutransfer.analysis.optimum as optimum
import mutransfer.sweep.search.transfer.decisions as decisions
from mutransfer.analysis import pointnoise
from mutransfer.analysis.cells import all_seeds, cell_stats

HERE = Path(__file__).parent
LOCAL_ROUNDS = 4   # refits of the window's LR set (on the real stores it settles in 1-2)


def window_arrays(arr, inside: np.ndarray):
    """`arr` as if only the LRs `inside` had run (the seeds' offsets then come from them)."""
    return dataclasses.replace(arr, **{f: np.where(inside[None, :], getattr(arr, f), 0)
                                       for f in ("n_trials", "n_div", "n_loss", "loss_sum",
                                                 "loss_sq")})


def local_variance(arr, stats, inside: np.ndarray, offsets: bool) -> np.ndarray:
    """optimum.seed_variance with the smooth model fitted from the LRs `inside` only (and,
    with `offsets`, the seeds' scatter about offsets fitted there)."""
    loss = stats.usable_loss[0]
    if not np.isfinite(loss).any():
        return np.full(len(loss), np.nan)
    centre = float(arr.log2_lr[int(np.nanargmin(loss))])
    if offsets:
        arr_in = window_arrays(arr, inside)
        s2, df = pointnoise.seed_scatter(arr_in, cell_stats(arr_in, all_seeds(arr_in)))
    else:
        s2, df = pointnoise.seed_scatter(arr, stats)
    model = pointnoise.smooth_model(arr.log2_lr, s2, np.where(inside, df, 0.0), centre)
    with np.errstate(invalid="ignore"):
        shrunk = (df * np.nan_to_num(s2) + pointnoise.PRIOR_DF * model) / (df + pointnoise.PRIOR_DF)
    return np.where(stats.usable[0], np.maximum(shrunk, pointnoise.VAR_FLOOR), np.nan)


def variant_optima_of(local: bool, offsets: bool, flat: bool):
    """optimum.optima_of with the noise model read locally and/or equal weights in lr*'s fit."""

    def optima_of(groups, window):
        stats = [cell_stats(arr, all_seeds(arr)) for _, arr in groups]
        curves = np.vstack([st.usable_loss[0] for st in stats])
        n_loss = np.vstack([st.n_loss[0] for st in stats])
        x = groups[0][1].log2_lr
        window = optimum.grid_window(x, curves, window)
        argmin = np.array([int(np.nanargmin(c)) if np.isfinite(c).any() else 0 for c in curves])
        inside = np.abs(x[None, :] - x[argmin][:, None]) < window[:, None]
        if not local:
            inside[:] = True
        for _ in range(LOCAL_ROUNDS):
            seed_var = np.vstack([local_variance(arr, st, inside[i], offsets)
                                  for i, ((_, arr), st) in enumerate(zip(groups, stats))])
            with np.errstate(invalid="ignore", divide="ignore"):
                mean_var = seed_var / n_loss
            first = fit.fit_optimum(x, curves, window, point_var=mean_var)
            now = np.where(first.fitted[:, None], first.weights > 0, inside)
            if not local or (now == inside).all():
                break
            inside = now
        tau2 = np.array([pointnoise.lack_of_fit(x, curves[i], mean_var[i], first.row(i))
                         for i in range(len(groups))])
        fit_var, fit_tau2 = seed_var, tau2
        if flat:
            fit_var, fit_tau2 = np.where(np.isfinite(seed_var), 1.0, np.nan), 0.0 * tau2
        with np.errstate(invalid="ignore", divide="ignore"):
            point_var = fit_var / n_loss + fit_tau2[:, None]
        fits = fit.fit_optimum(x, curves, window, point_var=point_var)
        left_out = optimum.leave_one_out(groups, window, fit_var, fit_tau2)
        shifts = optimum.one_lr_shifts(x, curves, point_var, fits, window)
        out = []
        for i, ((key, arr), st) in enumerate(zip(groups, stats)):
            row = fits.row(i)
            spread = optimum.group_spread(x, optimum.seed_curves(arr, st), curves[i], row,
                                          left_out[i], seed_var[i], st.n_loss[0], float(tau2[i]))
            side, hint = optimum.edge_of(st, row)
            out.append(optimum.GroupOptimum(key, arr, st, row, spread, side, hint,
                                            float(shifts[i])))
        return out

    return optima_of


def narrow(steps: float, least: float) -> None:
    """The window: `steps` grid steps, at least `least` octaves, wherever lr* is read."""
    fit.WINDOW_STEPS = steps
    base = fit.grid_window

    def grid_window(log2_lr, loss, window=least):
        return base(log2_lr, loss, least)

    optimum.grid_window = grid_window
    decisions.grid_window = grid_window


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--local", action="store_true")
    ap.add_argument("--offsets", action="store_true")
    ap.add_argument("--flat", action="store_true")
    ap.add_argument("--narrow", type=float, nargs=2, metavar=("STEPS", "MIN"))
    ap.add_argument("script", help="SCRIPT.py; every argument after it is the script's")
    split = next((i for i, a in enumerate(sys.argv) if a.endswith(".py") and i > 0),
                 len(sys.argv) - 1)
    args = ap.parse_args(sys.argv[1:split + 1])
    rest = sys.argv[split + 1:]
    if args.narrow:
        narrow(*args.narrow)
    if args.local or args.flat:
        optimum.optima_of = variant_optima_of(args.local, args.offsets, args.flat)
    sys.path.insert(0, str(HERE))
    sys.argv = [args.script, *rest]
    runpy.run_path(str(HERE / args.script), run_name="__main__")


if __name__ == "__main__":
    main()
