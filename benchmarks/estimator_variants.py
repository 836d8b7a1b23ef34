"""Run a benchmark under a variant of the lr* estimator: the noise model read from every LR
(main's estimator before it became local), equal weights, misfit-aware (Huber) weights, a
misfit floor on each LR's variance, a narrower window, a curve of fixed asymmetry. The
comparison of issues 27 and 29 item 3 (can lr* be read locally, so that a search running part
of the grid reproduces the grid's lr*, without losing its grid-placement stability on real
curves?).

    python benchmarks/estimator_variants.py [--every-lr] [--flat] [--robust C] [--floor SD] \
        [--narrow STEPS MIN] [--linex K] [--level] SCRIPT.py [SCRIPT's arguments...]

SCRIPT is a benchmark of this folder that reads lr* through mutransfer.analysis
(real_curves.py, search_targets.py, search_floor.py). The variants, any combination:
  --every-lr  the per-LR noise model (pointnoise.smooth_model, whose two slopes set every LR's
              weight) and the seeds' offsets behind its scatter (cells.seed_offsets) fitted
              over every LR that trained, in one pass: the estimator before it became local
              (the analysis now reads both from the fit window's LRs, refitted until that set
              stops changing, optimum.weigh_locally: what this script's former `--local
              --offsets` did; those two flags are gone, their variant is the default).
  --flat      every LR weighs alike in lr*'s fit (its interval keeps the noise model).
  --robust C  misfit-aware weights: inside fit_optimum's fixed point each LR's weight is also
              multiplied by a Huber factor min(1, C / |z|), z its residual from the fitted
              parabola over its noise sd (1 / sqrt(precision)), so an LR far off the parabola
              (the blow-up 1-2 octaves above lr*) pulls on lr* with a bounded force (IRLS);
              the fit's weights, and so vertex_sensitivity / model_variance, carry the factor.
  --floor SD  a model-misfit floor: SD^2 nats^2 added to every LR's variance in lr*'s fit, so
              no LR's weight exceeds 1 / SD^2 however small its seeds' scatter (the parabola
              does not hold to better than the curve's LR-to-LR roughness anyway).
  --level     the noise model's smooth part is one level over the window's LRs, not a line
              in distance on each side (a blow-up LR entering the window steepens the slopes
              and so lowers the model at the optimum, raising its LRs' weights 9-90x).
  --narrow    WINDOW_STEPS grid steps, at least MIN octaves (main: 5 steps, at least 2.5), for
              the analysis and for the search's own decisions alike.
  --linex K   lr*'s curve is the linex c + A 2 (e^{Kt} - 1 - Kt) / K^2 with its asymmetry K
              fixed (three parameters, as the parabola), not the parabola: the fixed-shape
              test of issue 27 (K > 0 rises faster above lr* than below). The fit, the seeds'
              deviations, the vertex's sensitivity, the model variance and the noise model's
              residuals all use it.
Without a flag the script runs as the analysis does. The figures of the comparison are in
benchmarks/README.md "A local lr* estimator" and "lr* on real curves" (the fixed shape).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import numpy as np

import mutransfer.analysis.fit as fit
import mutransfer.analysis.optimum as optimum
import mutransfer.analysis.pointnoise as pointnoise
import mutransfer.sweep.search.transfer.decisions as decisions
from mutransfer.analysis.cells import all_seeds, cell_stats

HERE = Path(__file__).parent


def variant_optima_of(every_lr: bool, flat: bool):
    """optimum.optima_of with the noise model read from every LR and/or equal weights in lr*'s
    fit."""

    def optima_of(groups, window):
        stats = [cell_stats(arr, all_seeds(arr)) for _, arr in groups]
        curves = np.vstack([st.usable_loss[0] for st in stats])
        n_loss = np.vstack([st.n_loss[0] for st in stats])
        x = groups[0][1].log2_lr
        window = optimum.grid_window(x, curves, window)
        if every_lr:
            w = optimum.weigh(groups, stats, curves, window, np.ones(curves.shape, bool))
        else:
            w = optimum.weigh_locally(groups, stats, curves, window)
        fit_var, fit_tau2, fits = w.seed_var, w.tau2, w.fits
        if flat:
            fit_var, fit_tau2 = np.where(np.isfinite(w.seed_var), 1.0, np.nan), 0.0 * w.tau2
            with np.errstate(invalid="ignore", divide="ignore"):
                fits = fit.fit_optimum(x, curves, window, point_var=fit_var / n_loss)
        with np.errstate(invalid="ignore", divide="ignore"):
            point_var = fit_var / n_loss + fit_tau2[:, None]
        left_out = optimum.leave_one_out(groups, window, fit_var, fit_tau2)
        shifts = optimum.one_lr_shifts(x, curves, point_var, fits, window)
        out = []
        for i, ((key, arr), st) in enumerate(zip(groups, stats)):
            row = fits.row(i)
            spread = optimum.group_spread(x, optimum.seed_curves(arr, st), curves[i], row,
                                          left_out[i], w.seed_var[i], st.n_loss[0],
                                          float(w.tau2[i]))
            side, hint = optimum.edge_of(st, row)
            out.append(optimum.GroupOptimum(key, arr, st, row, spread, side, hint,
                                            float(shifts[i])))
        return out

    return optima_of


ROBUST_ROUNDS = 12  # reweighting rounds; the factors settle in a handful on stores B and C


def robust_fit_optimum(c: float | None, floor: float = 0.0):
    """fit.fit_optimum with Huber factors min(1, c / |z|) on the standardized residuals z
    (residual from the fitted parabola times sqrt of the point's precision): iteratively
    reweighted least squares, each round a full window fixed point with every point's variance
    divided by its factor, so the final fit's weights (and vertex_sensitivity, model_variance
    through them) carry the factors."""
    base = fit.fit_optimum

    def fit_optimum(log2_lr, loss, window=fit.FIT_WINDOW, point_var=None):
        x = np.asarray(log2_lr, dtype=float)
        y = np.asarray(loss, dtype=float)
        pv = np.ones(y.shape) if point_var is None else \
            np.broadcast_to(np.asarray(point_var, dtype=float), y.shape) + floor**2
        factor = np.ones(y.shape)
        out = base(x, y, window, point_var=pv)
        for _ in range(ROBUST_ROUNDS if c else 0):
            with np.errstate(invalid="ignore", divide="ignore"):
                z = (y - fit.model(x, np.nan_to_num(out.params))) / np.sqrt(pv)
                new = np.where(out.fitted[:, None] & np.isfinite(z),
                               np.minimum(1.0, c / np.abs(z)), factor)
            if np.abs(new - factor).max(initial=0.0) < 1e-4:
                break
            factor = new
            out = base(x, y, window, point_var=pv / factor)
        return out

    return fit_optimum


def narrow(steps: float, least: float) -> None:
    """The window: `steps` grid steps, at least `least` octaves, wherever lr* is read."""
    fit.WINDOW_STEPS = steps
    base = fit.grid_window

    def grid_window(log2_lr, loss, window=least):
        return base(log2_lr, loss, least)

    optimum.grid_window = grid_window
    decisions.grid_window = grid_window


GN_STEPS = 12  # Gauss-Newton steps of the linex fit from the parabola's closed form


def linex(k: float) -> None:
    """lr*'s curve: the linex of fixed asymmetry k, wherever the analysis fits one. Its fit
    starts from the parabola's closed form and takes Gauss-Newton steps (each the best of a
    full, half or quarter step, or none); the window's fixed point is fit.fit_optimum's."""

    def shape(t):
        return 2.0 * (np.expm1(k * t) - k * t) / (k * k)

    def model(x, params):
        c, a, v = (params[:, i:i + 1] for i in range(3))
        return c + a * shape(x[None, :] - v)

    def jacobian(x, params):
        a, v = params[:, 1:2], params[:, 2:3]
        t = x[None, :] - v
        return np.stack([np.ones_like(t), shape(t), -a * 2.0 * np.expm1(k * t) / k], axis=-1)

    parabola = fit.weighted_parabola

    def wrss(x, y, w, params):
        r = np.where(w > 0, np.nan_to_num(y) - model(x, params), 0.0)
        return (w * r * r).sum(axis=1)

    def weighted_linex(x, y, w, v0):
        params = parabola(x, y, w, v0)
        for _ in range(GN_STEPS):
            ok = np.isfinite(params).all(axis=1)
            p = np.where(ok[:, None], params, 0.0)
            jac = jacobian(x, p)
            jw = jac * w[..., None]
            r = np.where(w > 0, np.nan_to_num(y) - model(x, p), 0.0)
            h = np.einsum("blp,blq->bpq", jw, jac)
            g = np.einsum("blp,bl->bp", jw, r)
            bad = ~(np.isfinite(h).all(axis=(1, 2)) & np.isfinite(g).all(axis=1))
            h, g = np.where(bad[:, None, None], np.eye(3), h), np.where(bad[:, None], 0.0, g)
            step = np.nan_to_num(np.einsum("bpq,bq->bp", np.linalg.pinv(h), g))
            best, best_rss = p, wrss(x, y, w, p)
            for f in (1.0, 0.5, 0.25):
                rss = wrss(x, y, w, p + f * step)
                better = rss < best_rss
                best = np.where(better[:, None], p + f * step, best)
                best_rss = np.where(better, rss, best_rss)
            params = np.where(ok[:, None], best, params)
        return params

    fit.model, fit.jacobian, fit.weighted_parabola = model, jacobian, weighted_linex
    pointnoise.model = model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every-lr", action="store_true")
    ap.add_argument("--flat", action="store_true")
    ap.add_argument("--robust", type=float, metavar="C")
    ap.add_argument("--floor", type=float, metavar="SD")
    ap.add_argument("--narrow", type=float, nargs=2, metavar=("STEPS", "MIN"))
    ap.add_argument("--linex", type=float, metavar="K")
    ap.add_argument("--level", action="store_true")
    ap.add_argument("script", help="SCRIPT.py; every argument after it is the script's")
    split = next((i for i, a in enumerate(sys.argv) if a.endswith(".py") and i > 0),
                 len(sys.argv) - 1)
    args = ap.parse_args(sys.argv[1:split + 1])
    rest = sys.argv[split + 1:]
    if args.narrow:
        narrow(*args.narrow)
    if args.linex:
        linex(args.linex)
    if args.robust or args.floor:
        robust = robust_fit_optimum(args.robust, args.floor or 0.0)
        fit.fit_optimum = optimum.fit_optimum = decisions.fit_optimum = robust
    if args.level:  # the noise model a level alone: no slopes for a blow-up LR to steepen
        pointnoise.MIN_MODEL_LRS = sys.maxsize
    if args.every_lr or args.flat:
        optimum.optima_of = variant_optima_of(args.every_lr, args.flat)
    sys.path.insert(0, str(HERE))
    sys.argv = [args.script, *rest]
    runpy.run_path(str(HERE / args.script), run_name="__main__")


if __name__ == "__main__":
    main()
