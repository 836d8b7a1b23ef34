"""Run a benchmark under a variant of the lr* estimator: the noise model read from every LR
(main's estimator before it became local), equal weights, misfit-aware (Huber) weights, a
misfit floor on each LR's variance, a narrower window, a curve of fixed asymmetry. The
comparison of issues 27 and 29 item 3 (can lr* be read locally, so that a search running part
of the grid reproduces the grid's lr*, without losing its grid-placement stability on real
curves?).

    python benchmarks/estimator_variants.py [--every-lr] [--flat] [--robust C] [--floor SD] \
        [--band H] [--narrow STEPS MIN] [--linex K] [--centroid SD TAU] [--lepski KAPPA] \
        [--level | --blowup K | --core R | --bounded S | --fixed-slopes BELOW ABOVE | \
         --slope-prior BELOW ABOVE DF | --pooled] \
        [--oracle-var | --oracle-model | --oracle-slopes] SCRIPT.py [SCRIPT's arguments...]

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
  --blowup K  the noise model's line fitted without the window's blow-up LRs: those whose
              scatter exceeds K x the near-optimum level (LRs within 1 octave of the argmin);
              they keep their own scatter, shrunk toward the line read from the others.
  --core R    the noise model flat at the level of the LRs within R octaves of the argmin and
              rising beyond, one slope per side from the LRs there alone: an LR far out moves
              its side's slope, never the model at the optimum.
  --bounded S each of the line's two slopes kept within [-S, S] (ln variance per octave; the
              dense 8-seed stores' slopes lie in -0.83..+1.98 inside the window).
  --fixed-slopes BELOW ABOVE  the line's two slopes fixed (ln variance per octave away from
              the argmin, below and above it), only its level read from the window's LRs.
  --slope-prior BELOW ABOVE DF  the line's slopes drawn toward (BELOW, ABOVE): a pseudo-LR
              of DF degrees of freedom one octave out on each side on the prior slope (ridge).
  --pooled    one pair of slopes per family from every width's window LRs, each width its own
              level (weigh's groups fitted together whose keys differ only in the width).
  --oracle-var / --oracle-model (real_curves.py only) each LR's seed variance read from the
              dense store the sub-grid was cut from: its 8-seed scatter there (--oracle-var,
              a perfect per-LR noise model), or its smooth model, toward which the sub-grid's
              own scatter is shrunk (--oracle-model, a perfect smooth model): how much any
              noise model could gain. --oracle-slopes: the dense model's two slopes only,
              the level the sub-grid's own (its LRs' mean log scatter less the slopes' part).
  --band H    a window in loss too: each LR's weight also times tricube(h / H), h its loss
              above the fitted minimum (nats), so a cliff or a far wall shapes no bowl.
  --narrow    WINDOW_STEPS grid steps, at least MIN octaves (main: 5 steps, at least 2.5), for
              the analysis and for the search's own decisions alike.
  --linex K   lr*'s curve is the linex c + A 2 (e^{Kt} - 1 - Kt) / K^2 with its asymmetry K
              fixed (three parameters, as the parabola), not the parabola: the fixed-shape
              test of issue 27 (K > 0 rises faster above lr* than below). The fit, the seeds'
              deviations, the vertex's sensitivity, the model variance and the noise model's
              residuals all use it.
  --centroid SD TAU  lr* the centroid of the window's LRs under weights exp(-(loss - min) / T),
              T = 2 A SD^2 from the parabola's curvature A (a Gaussian of sd SD octaves on a
              parabola), each LR's loss first drawn toward the parabola as far as its own
              noise outweighs TAU^2 (TAU nats; inf: not at all), the parabola standing in
              where the window has no LR (centroid_of). A grid's placement moves a smooth
              kernel's centroid far less than a vertex (benchmarks/README.md).
  --lepski KAPPA  each fit's window chosen per curve from 0.5-1.0 x the analysis's (Lepski's
              rule: the widest whose vertex lies within KAPPA s.e. of every narrower one's),
              so a curve that is no parabola over the wide window is read over a narrow one.
Without a flag the script runs as the analysis does. The figures of the comparison are in
benchmarks/README.md "A local lr* estimator" and "lr* on real curves" (the fixed shape).
"""

from __future__ import annotations

import argparse
import math
import runpy
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import real_curves  # beside this script: its complete_cells (the oracle's dense groups)
import shared_shape  # beside this script: the linex curve

import mutransfer.analysis.cells as cells
import mutransfer.analysis.fit as fit
import mutransfer.analysis.intervals as intervals
import mutransfer.analysis.optimum as optimum
import mutransfer.analysis.pointnoise as pointnoise
import mutransfer.sweep.search.transfer.decisions as decisions
from mutransfer.analysis.cells import all_seeds, cell_stats, seed_lr_arrays
from mutransfer.analysis.choice import resolve
from mutransfer.analysis.groups import prepare
from mutransfer.results.store import Store

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


def reweighted_fit_optimum(factors, floor: float = 0.0):
    """fit.fit_optimum iteratively reweighted: each round a full window fixed point with every
    point's variance divided by its factor, `factors(x, y, pv, out, factor)` giving the next
    factors from the last fit `out` (None: no reweighting), until they settle; the final fit's
    weights (and vertex_sensitivity, model_variance through them) carry the factors. `floor`:
    SD^2 added to every point's variance first (--floor)."""
    base = fit.fit_optimum

    def fit_optimum(log2_lr, loss, window=fit.FIT_WINDOW, point_var=None):
        x = np.asarray(log2_lr, dtype=float)
        y = np.asarray(loss, dtype=float)
        pv = np.ones(y.shape) if point_var is None else \
            np.broadcast_to(np.asarray(point_var, dtype=float), y.shape) + floor**2
        factor = np.ones(y.shape)
        out = base(x, y, window, point_var=pv)
        for _ in range(ROBUST_ROUNDS if factors else 0):
            new = factors(x, y, pv, out, factor)
            if np.abs(new - factor).max(initial=0.0) < 1e-4:
                break
            factor = new
            out = base(x, y, window, point_var=pv / factor)
        return out

    return fit_optimum


def huber_factors(c: float):
    """Huber factors min(1, c / |z|) on the standardized residuals z (residual from the fitted
    parabola times sqrt of the point's precision): --robust."""
    def factors(x, y, pv, out, factor):
        with np.errstate(invalid="ignore", divide="ignore"):
            z = (y - fit.model(x, np.nan_to_num(out.params))) / np.sqrt(pv)
            return np.where(out.fitted[:, None] & np.isfinite(z),
                            np.minimum(1.0, c / np.abs(z)), factor)
    return factors


BAND_FLOOR = 1e-6  # the smallest band factor: the LRs that trained, and the edge rule, stay


def band_factors(height: float):
    """tricube(h / height), h each LR's loss above the fitted parabola's minimum (or the lowest
    loss, if lower): a window in loss as well as in LR, so a cliff or a far wall (an LR
    `height` nats above the bottom) never shapes the bowl, however near in LR: --band."""
    def factors(x, y, pv, out, factor):
        with np.errstate(invalid="ignore"):
            bottom = np.fmin(np.where(out.fitted, out.params[:, 0], np.nan),
                             np.nanmin(np.where(np.isfinite(y), y, np.nan), axis=1))
            h = np.maximum(y - bottom[:, None], 0.0) / height
        return np.where(np.isfinite(h), np.maximum(fit.tricube(h), BAND_FLOOR), factor)
    return factors


def narrow(steps: float, least: float) -> None:
    """The window: `steps` grid steps, at least `least` octaves, wherever lr* is read."""
    fit.WINDOW_STEPS = steps
    base = fit.grid_window

    def grid_window(log2_lr, loss, window=least):
        return base(log2_lr, loss, least)

    optimum.grid_window = grid_window
    decisions.grid_window = grid_window


LEPSKI_SCALES = (0.5, 0.625, 0.75, 0.875, 1.0)  # windows tried, as shares of the analysis's


def lepski(kappa: float) -> None:
    """--lepski KAPPA: each row's window chosen from the ladder LEPSKI_SCALES x the analysis's
    (Lepski's rule for a local fit's bandwidth): the widest window whose vertex lies within
    KAPPA standard errors of every narrower window's vertex (each its own sandwich s.e. from
    the points' variances, fit.model_variance). A wide window averages the curve's roughness
    out; where the curve is not a parabola over it (a flat bottom between a slow wall and a
    cliff), the narrower windows' vertices disagree with it and a narrower one is read."""
    base = fit.fit_optimum

    def fit_optimum(log2_lr, loss, window=fit.FIT_WINDOW, point_var=None):
        x = np.asarray(log2_lr, dtype=float)
        y = np.asarray(loss, dtype=float)
        b = len(y)
        win = np.broadcast_to(np.asarray(window, dtype=float), (b,))
        fits = [base(x, y, win * s, point_var=point_var) for s in LEPSKI_SCALES]
        pv = None if point_var is None else np.broadcast_to(np.asarray(point_var, float), y.shape)
        k_n = len(fits)
        v, se = np.full((k_n, b), np.nan), np.full((k_n, b), np.nan)
        for k, f in enumerate(fits):
            for i in np.flatnonzero(f.fitted):
                row = f.row(i)
                if pv is None:
                    rss, dof = fit.residual_variance(x, y[i], row)
                    var = fit.model_variance(x, row) * rss / dof if dof > 0 else np.nan
                else:
                    var = fit.model_variance(x, row, pv[i])
                v[k, i], se[k, i] = row.log2_lr[0], math.sqrt(var) if var >= 0 else np.nan
        chosen = np.full(b, k_n - 1)
        for i in range(b):
            ok = [k for k in range(k_n) if np.isfinite(v[k, i]) and np.isfinite(se[k, i])]
            best = None
            for k in ok:
                if all(abs(v[k, i] - v[j, i]) <= kappa * se[j, i] for j in ok if j < k):
                    best = k
                else:
                    break
            if best is not None:
                chosen[i] = best
        pick = {f: np.stack([getattr(g, f) for g in fits]) for f in fits[0].__dataclass_fields__}
        return fit.OptimumFit(*(pick[f][chosen, np.arange(b)] for f in pick))

    fit.fit_optimum = optimum.fit_optimum = decisions.fit_optimum = fit_optimum


CENTROID_REACH = 4.0  # sds of the kernel: how far past the window's LRs the parabola stands in


@dataclass
class CentroidFit(fit.OptimumFit):
    """fit.OptimumFit whose lr* is the centroid (--centroid), with d lr* / d loss_j."""

    sensitivity: np.ndarray | None = None  # (B, L), 0 outside a fitted row's window

    def row(self, i: int) -> CentroidFit:
        return CentroidFit(*(getattr(self, f)[i:i + 1] for f in self.__dataclass_fields__))


def centroid_of(x, y, inside, params, noise, sd: float, tau: float):
    """(lr*, d lr*/d y_j (L,)) of one fitted row: the centroid of the window's LRs under
    weights exp(-(y - min) / T), T = 2 A sd^2 (on a parabola: a Gaussian of sd `sd` octaves
    about its vertex). Each LR's loss is first drawn toward the fitted parabola as far as its
    own noise (the variance of its mean, `noise`) outweighs tau^2, the roughness a real curve
    shows about it; the parabola also stands in at the grid's step wherever the window has no
    LR (a hole: a partially diverged LR, one left out; beyond its ends) out to CENTROID_REACH
    sds. The derivative holds T and the stand-ins fixed."""
    c, a, v0 = params
    xs = x[inside]
    keep = (tau**2 / (tau**2 + noise[inside])) if math.isfinite(tau) else np.ones(len(xs))
    ys = keep * y[inside] + (1 - keep) * (c + a * (xs - v0) ** 2)
    step = float(np.median(np.diff(xs))) if len(xs) > 1 else 1.0
    reach = CENTROID_REACH * sd
    k = np.arange(math.ceil((v0 - reach - xs[0]) / step),
                  math.floor((v0 + reach - xs[0]) / step) + 1)
    lattice = xs[0] + step * k
    stand = lattice[np.abs(lattice[:, None] - xs[None, :]).min(axis=1) > step / 4]
    xa = np.concatenate([xs, stand])
    ya = np.concatenate([ys, c + a * (stand - v0) ** 2])
    temp = 2.0 * a * sd**2
    w = np.exp(-(ya - ya.min()) / temp)
    p = w / w.sum()
    v = float((p * xa).sum())
    sens = np.zeros(len(x))
    sens[inside] = -keep * (xs - v) * p[:len(xs)] / temp
    return v, sens


def centroid(sd: float, tau: float) -> None:
    """lr* the centroid of centroid_of, wherever the analysis (and the search) reads one: the
    parabola's fit still gives the window, the curvature (T), the stand-ins and whether there
    is a fitted optimum at all; the interval's first-order pulls and model variance use the
    centroid's derivative, and its leave-one-seed-out refits the centroid itself."""
    base_fit, base_sens, base_dev = fit.fit_optimum, fit.vertex_sensitivity, fit.seed_deviations

    def fit_optimum(log2_lr, loss, window=fit.FIT_WINDOW, point_var=None):
        out = base_fit(log2_lr, loss, window, point_var=point_var)
        x = np.asarray(log2_lr, dtype=float)
        y = np.asarray(loss, dtype=float)
        noise = np.zeros(y.shape)
        if point_var is not None:
            pv = np.broadcast_to(np.asarray(point_var, dtype=float), y.shape)
            noise = np.where(np.isfinite(pv) & (pv > 0), pv, 0.0)
        log2, best, sens = out.log2_lr.copy(), out.loss.copy(), np.zeros(y.shape)
        for i in np.flatnonzero(out.fitted):
            c, a, v0 = out.params[i]
            log2[i], sens[i] = centroid_of(x, y[i], out.weights[i] > 0, out.params[i],
                                           noise[i], sd, tau)
            best[i] = c + a * (log2[i] - v0) ** 2
        inside = out.weights > 0
        below = (inside & (x[None, :] < log2[:, None])).sum(axis=1)
        above = (inside & (x[None, :] > log2[:, None])).sum(axis=1)
        sides = np.where(out.fitted, np.minimum(below, above), out.sides)
        fields = {f: getattr(out, f) for f in fit.OptimumFit.__dataclass_fields__}
        return CentroidFit(**{**fields, "log2_lr": log2, "loss": best, "sides": sides},
                           sensitivity=sens)

    def vertex_sensitivity(log2_lr, f):
        if isinstance(f, CentroidFit):
            return f.sensitivity[0] if f.fitted[0] else None
        return base_sens(log2_lr, f)

    def seed_deviations(log2_lr, seed_loss, f):
        if not (isinstance(f, CentroidFit) and f.fitted[0]):
            return base_dev(log2_lr, seed_loss, f)
        x = np.asarray(log2_lr, dtype=float)
        sens = f.sensitivity[0]
        has = np.isfinite(seed_loss) & (sens != 0)[None, :]
        shared = has.sum(axis=0) >= 2  # else residuals from the fitted curve (Optuna)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.where(shared, np.nanmean(np.where(has, seed_loss, np.nan), axis=0),
                            fit.model(x, f.params[:1])[0])
            resid = np.where(has, seed_loss - mean[None, :], np.nan)
            resid = resid - np.nanmean(resid, axis=1, keepdims=True)  # offsets move nothing
        return np.where(has.any(axis=1), np.nansum(resid * sens[None, :], axis=1), np.nan)

    fit.fit_optimum = optimum.fit_optimum = decisions.fit_optimum = fit_optimum
    fit.vertex_sensitivity = decisions.vertex_sensitivity = vertex_sensitivity
    fit.seed_deviations = intervals.seed_deviations = seed_deviations


GN_STEPS = 12  # Gauss-Newton steps of the linex fit from the parabola's closed form


def linex(k: float) -> None:
    """lr*'s curve: the linex of fixed asymmetry k, wherever the analysis fits one. Its fit
    starts from the parabola's closed form and takes Gauss-Newton steps (each the best of a
    full, half or quarter step, or none); the window's fixed point is fit.fit_optimum's."""

    def model(x, params):
        c, a, v = (params[:, i:i + 1] for i in range(3))
        return c + a * shared_shape.linex(x[None, :] - v, k)

    def jacobian(x, params):
        a, v = params[:, 1:2], params[:, 2:3]
        t = x[None, :] - v
        return np.stack([np.ones_like(t), shared_shape.linex(t, k),
                         -a * 2.0 * np.expm1(k * t) / k], axis=-1)

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


def log_scatter(s2, df):
    """(ok mask, log s2 at the ok LRs, the chi-square bias term smooth_model adds back)."""
    ok = (df > 0) & np.isfinite(s2)
    y = np.log(np.maximum(s2[ok], pointnoise.VAR_FLOOR))
    bias = float(ok.sum() / df[ok].sum()) if ok.any() else 0.0
    return ok, y, bias


def core_level(x, s2, df, centre, radius):
    """(ok mask, (L,) log scatter of every LR, the df-weighted mean log scatter of the ok LRs
    within `radius` octaves of `centre` (None without one), the chi-square bias term)."""
    ok, _, bias = log_scatter(s2, df)
    ly = np.log(np.maximum(np.nan_to_num(s2), pointnoise.VAR_FLOOR))
    core = ok & (np.abs(x - centre) <= radius + 1e-9)
    if not core.any():
        return ok, ly, None, bias
    return ok, ly, float((df[core] * ly[core]).sum() / df[core].sum()), bias


def blowup_model(k: float):
    """pointnoise.smooth_model fitted without the window's blow-up LRs: those whose scatter
    exceeds k x the near-optimum level (the df-weighted mean log scatter of the LRs within
    NEAR octave of the centre, chi-square bias added). They keep their own scatter, shrunk
    toward the model extrapolated from the others."""
    base = pointnoise.smooth_model

    def smooth_model(x, s2, df, centre):
        ok, ly, level, bias = core_level(x, s2, df, centre, NEAR)
        if level is None:
            return base(x, s2, df, centre)
        blown = ok & (ly > level + bias + np.log(k))
        return base(x, np.where(blown, np.nan, s2), np.where(blown, 0.0, df), centre)

    return smooth_model


NEAR = 1.0  # octaves: the LRs around the argmin whose scatter sets the near-optimum level


def core_model(radius: float):
    """The model flat at the level of the LRs within `radius` octaves of the centre (their
    df-weighted mean log scatter, chi-square bias added) and rising beyond it, one slope per
    side fitted to the LRs there alone (through the level at the core's edge; at least two on
    that side, else flat): an LR far out moves its side's slope only, never the model at the
    optimum."""
    base = pointnoise.smooth_model

    def smooth_model(x, s2, df, centre):
        ok, ly, level, bias = core_level(x, s2, df, centre, radius)
        if level is None:
            return base(x, s2, df, centre)
        out = np.full(len(x), level)
        for side in (centre - x, x - centre):
            t = np.maximum(side - radius, 0.0)
            far = ok & (t > 0)
            if far.sum() >= 2:
                slope = float((df[far] * t[far] * (ly[far] - level)).sum()
                              / (df[far] * t[far] ** 2).sum())
                out = out + slope * t
        return np.exp(out + bias)

    return smooth_model


def bounded_model(top: float):
    """pointnoise.smooth_model with each slope kept within [-top, top] (natural log of
    variance per octave): a slope fitted outside it is fixed at the bound and the rest refitted
    (a side smooth_model gives no slope keeps none)."""

    def smooth_model(x, s2, df, centre):
        ok, y, bias = log_scatter(s2, df)
        if not ok.any():
            return np.full(len(x), np.nan)
        sides = sides_of(x, centre)
        free = [k for k in range(2) if ok.sum() >= pointnoise.MIN_MODEL_LRS
                and (sides[ok, k] > 0).sum() >= 2]
        fixed: dict[int, float] = {}
        w = np.sqrt(df[ok])
        while True:
            cols = [k for k in free if k not in fixed]
            off = sides[:, list(fixed)] @ np.array(list(fixed.values()), float)
            design = np.column_stack([np.ones(len(x)), sides[:, cols]])
            coef = np.linalg.lstsq(design[ok] * w[:, None], (y - off[ok]) * w, rcond=None)[0]
            beyond = {k: float(np.clip(c, -top, top)) for k, c in zip(cols, coef[1:])
                      if abs(c) > top}
            if not beyond:
                return np.exp(design @ coef + off + bias)
            fixed.update(beyond)

    return smooth_model


def sides_of(x, centre):
    """(L, 2) distance below and above `centre`, 0 on the other side."""
    return np.stack([np.maximum(centre - x, 0.0), np.maximum(x - centre, 0.0)], axis=1)


def family_variance(x, scat, usable):
    """(G, L) shrunk seed variance of the widths of one family from their (s2, df, centre):
    log s2 ~ each width's level + one slope below and one above shared by the family, least
    squares weighted by df (a side with fewer than two LRs, or the family with fewer than
    MIN_MODEL_LRS, gets no slope)."""
    g = len(scat)
    ok = [(df > 0) & np.isfinite(s2) for s2, df, _ in scat]
    if not any(o.any() for o in ok):
        return np.full((g, len(x)), np.nan)
    levels = np.vstack([np.outer(o[o], np.eye(g)[i]) for i, o in enumerate(ok)])
    sides = np.vstack([sides_of(x, c)[o] for (_, _, c), o in zip(scat, ok)])
    keep = [k for k in range(2) if (sides[:, k] > 0).sum() >= 2
            and len(sides) >= pointnoise.MIN_MODEL_LRS]
    design = np.hstack([levels, sides[:, keep]])
    y = np.concatenate([np.log(np.maximum(s2[o], pointnoise.VAR_FLOOR))
                        for (s2, _, _), o in zip(scat, ok)])
    w = np.sqrt(np.concatenate([df[o] for (_, df, _), o in zip(scat, ok)]))
    coef = np.linalg.lstsq(design * w[:, None], y * w, rcond=None)[0]
    out = np.full((g, len(x)), np.nan)
    for i, ((s2, df, centre), o) in enumerate(zip(scat, ok)):
        if not o.any():
            continue
        bias = float(o.sum() / df[o].sum())
        model = np.exp(coef[i] + sides_of(x, centre)[:, keep] @ coef[g:] + bias)
        shrunk = ((df * np.nan_to_num(s2) + pointnoise.PRIOR_DF * model)
                  / (df + pointnoise.PRIOR_DF))
        out[i] = np.where(usable[i], np.maximum(shrunk, pointnoise.VAR_FLOOR), np.nan)
    return out


def fixed_model(below: float, above: float):
    """pointnoise.smooth_model with its two slopes fixed, only the level read from the
    window's LRs."""

    def smooth_model(x, s2, df, centre):
        return own_level(x, s2, df, centre, (below, above))

    return smooth_model


def prior_model(below: float, above: float, weight: float):
    """pointnoise.smooth_model with its two slopes drawn toward (below, above): each side
    gets a pseudo-LR of `weight` degrees of freedom one octave from the centre whose log
    scatter lies on the prior slope (a ridge penalty weight x (slope - prior)^2 in the
    df-weighted least squares), so a side's few LRs move its slope only as far as their df
    outweigh the prior's."""

    def smooth_model(x, s2, df, centre):
        ok, y, bias = log_scatter(s2, df)
        if not ok.any():
            return np.full(len(x), np.nan)
        design = np.column_stack([np.ones(len(x)), sides_of(x, centre)])
        w = np.sqrt(df[ok])
        pseudo = np.sqrt(weight) * np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        a = np.vstack([design[ok] * w[:, None], pseudo])
        b = np.concatenate([y * w, np.sqrt(weight) * np.array([below, above])])
        coef = np.linalg.lstsq(a, b, rcond=None)[0]
        return np.exp(design @ coef + bias)

    return smooth_model


def pooled_weigh(groups, stats, curves, window, inside):
    """optimum.weigh with the noise model's two slopes shared by the widths of a family (the
    groups fitted together whose keys agree but for the width): one least-squares fit of log
    scatter, each width its own level, the family one slope below and one above."""
    x = groups[0][1].log2_lr
    scat = []
    for i, ((_, arr), st) in enumerate(zip(groups, stats)):
        local = cells.restrict(arr, inside[i])
        s2, df = pointnoise.seed_scatter(local, cell_stats(local, all_seeds(local)))
        loss = st.usable_loss[0]
        centre = float(x[int(np.nanargmin(loss))]) if np.isfinite(loss).any() else np.nan
        scat.append((s2, df, centre))
    seed_var = np.full(curves.shape, np.nan)
    families = {}
    for i, (key, _) in enumerate(groups):
        families.setdefault(tuple(key[:-1]), []).append(i)
    for members in families.values():
        seed_var[members] = family_variance(x, [scat[m] for m in members],
                                            [stats[m].usable[0] for m in members])
    return optimum.weigh_by(x, stats, curves, window, seed_var)


QUARTER = 4  # the dense stores' LRs sit on a quarter-octave grid


def fingerprints(arr) -> list[tuple]:
    """(quarter-octave LR, seed, that seed's mean loss there) of every trained (seed, LR) of a
    group: the same in a sub-grid of a dense store as in the store itself."""
    q = np.round(arr.log2_lr * QUARTER).astype(int)
    mean = arr.seed_mean
    return [(int(q[j]), int(arr.seeds[s]), round(float(mean[s, j]), 10))
            for s, j in zip(*np.nonzero(arr.n_loss > 0))]


class OracleVariance:
    """Each LR's seed variance as the dense store's all-seed scatter there (pointnoise's
    seed_scatter over every trained LR of the dense group, n_j - 1 degrees of freedom): what a
    perfect noise model would give a sub-grid of that store (the fit divides it by the
    sub-grid's own seed count, as it does the model's). Filled by every store real_curves
    opens (Store.tables), looked up by the group's (LR, seed, loss) fingerprints.

    With `smooth` the oracle is the dense group's smooth model instead (pointnoise.smooth_model
    fitted to its 8-seed scatter inside the fit window around its argmin), and each sub-grid
    LR's own scatter is shrunk toward it as the analysis shrinks toward its own model: the
    best a smooth model (anything item 2 of issue 27 can change) could do."""

    def __init__(self, smooth: bool = False, slopes: bool = False) -> None:
        self.smooth, self.slopes = smooth or slopes, slopes
        self.dense_slopes: list[np.ndarray] = []  # dense group -> its model's (below, above)
        self.owners: dict[tuple, set[int]] = {}  # fingerprint -> dense groups holding it
        self.var: list[dict[int, float]] = []    # dense group -> {quarter LR: seed variance}
        self.missed = 0

    def dense_variance(self, arr) -> np.ndarray:
        """(L,) the dense group's scatter at each LR, or its smooth model (`smooth`)."""
        st = cell_stats(arr, all_seeds(arr))
        if not self.smooth:
            return pointnoise.seed_scatter(arr, st)[0]
        loss = st.usable_loss
        x = arr.log2_lr
        centre = float(x[int(np.nanargmin(loss[0]))])
        inside = np.abs(x - centre) < fit.grid_window(x, loss)[0]
        local = cells.restrict(arr, inside)
        s2, df = pointnoise.seed_scatter(local, cell_stats(local, all_seeds(local)))
        ok, y, _ = log_scatter(s2, df)
        design = np.column_stack([np.ones(len(x)), sides_of(x, centre)])[ok]
        w = np.sqrt(df[ok])
        self.dense_slopes.append(np.linalg.lstsq(design * w[:, None], y * w, rcond=None)[0][1:])
        return pointnoise.smooth_model(x, s2, df, centre)

    def learn(self, trials) -> None:
        trials = real_curves.complete_cells(trials[trials["status"].astype(str) != "failed"])
        for _, sub in trials.groupby("parameterization"):
            prep = prepare(sub, resolve(sub, None, None, {}))
            for _, group in prep.trials.groupby(prep.group_cols, sort=True, dropna=False):
                arr = seed_lr_arrays(group)
                s2 = self.dense_variance(arr)
                q = np.round(arr.log2_lr * QUARTER).astype(int)
                self.var.append({int(k): float(v) for k, v in zip(q, s2) if np.isfinite(v)})
                for f in fingerprints(arr):
                    self.owners.setdefault(f, set()).add(len(self.var) - 1)

    def seed_variance(self, base):
        def seed_variance(arr, stats, inside):
            # the dense groups holding every (LR, seed, loss) of this one (at the base width
            # sp and mup_ssm are one network: either, their scatter is the same)
            owners = set.intersection(*[self.owners.get(f, set()) for f in fingerprints(arr)])
            if not owners:
                self.missed += 1
                return base(arr, stats, inside)
            var = self.var[min(owners)]
            q = np.round(arr.log2_lr * QUARTER).astype(int)
            v = np.array([var.get(int(k), np.nan) for k in q])
            if self.smooth:  # the sub-grid's own scatter, shrunk toward the dense model
                local = cells.restrict(arr, inside)
                s2, df = pointnoise.seed_scatter(local, cell_stats(local, all_seeds(local)))
                if self.slopes:  # the dense slopes, the level the sub-grid's own
                    x, loss = arr.log2_lr, stats.usable_loss[0]
                    v = own_level(x, s2, df, float(x[int(np.nanargmin(loss))]),
                                  self.dense_slopes[min(owners)])
                v = np.maximum((df * np.nan_to_num(s2) + pointnoise.PRIOR_DF * v)
                               / (df + pointnoise.PRIOR_DF), pointnoise.VAR_FLOOR)
            return np.where(stats.usable[0], v, np.nan)
        return seed_variance


def own_level(x, s2, df, centre, slopes) -> np.ndarray:
    """(L,) the model of the given (below, above) slopes about `centre`, its level the
    df-weighted mean of the LRs' log scatter less the slopes' part (+ the chi-square bias, as
    smooth_model)."""
    ok, y, bias = log_scatter(s2, df)
    line = sides_of(x, centre) @ np.asarray(slopes, float)
    if not ok.any():
        return np.full(len(x), np.nan)
    level = float((df[ok] * (y - line[ok])).sum() / df[ok].sum())
    return np.exp(level + line + bias)


def oracle_variance(smooth: bool, slopes: bool = False) -> OracleVariance:
    """Register every store real_curves opens with the oracle, and let the analysis read each
    LR's seed variance from it."""
    oracle = OracleVariance(smooth, slopes)
    tables = Store.tables

    def learning_tables(self, *a, **k):
        out = tables(self, *a, **k)
        oracle.learn(out.trials)
        return out

    Store.tables = learning_tables
    optimum.seed_variance = oracle.seed_variance(optimum.seed_variance)
    return oracle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every-lr", action="store_true")
    ap.add_argument("--flat", action="store_true")
    weights = ap.add_mutually_exclusive_group()
    weights.add_argument("--robust", type=float, metavar="C")
    ap.add_argument("--floor", type=float, metavar="SD")
    ap.add_argument("--narrow", type=float, nargs=2, metavar=("STEPS", "MIN"))
    ap.add_argument("--linex", type=float, metavar="K")
    ap.add_argument("--lepski", type=float, metavar="KAPPA")
    ap.add_argument("--centroid", type=float, nargs=2, metavar=("SD", "TAU"))
    weights.add_argument("--band", type=float, metavar="NATS")
    model = ap.add_mutually_exclusive_group()  # the noise model's smooth part, one of
    model.add_argument("--level", action="store_true")
    model.add_argument("--blowup", type=float, metavar="K")
    model.add_argument("--core", type=float, metavar="OCTAVES")
    model.add_argument("--bounded", type=float, metavar="SLOPE")
    model.add_argument("--fixed-slopes", type=float, nargs=2, metavar=("BELOW", "ABOVE"))
    model.add_argument("--slope-prior", type=float, nargs=3, metavar=("BELOW", "ABOVE", "DF"))
    model.add_argument("--pooled", action="store_true")
    oracle = ap.add_mutually_exclusive_group()
    oracle.add_argument("--oracle-var", action="store_true")
    oracle.add_argument("--oracle-model", action="store_true")
    oracle.add_argument("--oracle-slopes", action="store_true")
    ap.add_argument("script", help="SCRIPT.py; every argument after it is the script's")
    split = next((i for i, a in enumerate(sys.argv) if a.endswith(".py") and i > 0),
                 len(sys.argv) - 1)
    args = ap.parse_args(sys.argv[1:split + 1])
    rest = sys.argv[split + 1:]
    if args.narrow:
        narrow(*args.narrow)
    if args.linex:
        linex(args.linex)
    if args.lepski:
        lepski(args.lepski)
    if args.centroid:
        centroid(*args.centroid)
    if args.robust or args.floor or args.band:
        factors = huber_factors(args.robust) if args.robust else \
            band_factors(args.band) if args.band else None
        reweighted = reweighted_fit_optimum(factors, args.floor or 0.0)
        fit.fit_optimum = optimum.fit_optimum = decisions.fit_optimum = reweighted
    if args.level:  # the noise model a level alone: no slopes for a blow-up LR to steepen
        pointnoise.MIN_MODEL_LRS = sys.maxsize
    if args.blowup:
        pointnoise.smooth_model = blowup_model(args.blowup)
    if args.core is not None:
        pointnoise.smooth_model = core_model(args.core)
    if args.bounded is not None:
        pointnoise.smooth_model = bounded_model(args.bounded)
    if args.fixed_slopes:
        pointnoise.smooth_model = fixed_model(*args.fixed_slopes)
    if args.slope_prior:
        pointnoise.smooth_model = prior_model(*args.slope_prior)
    if args.pooled:
        optimum.weigh = pooled_weigh
    if args.every_lr or args.flat:
        optimum.optima_of = variant_optima_of(args.every_lr, args.flat)
    oracle = (oracle_variance(args.oracle_model, args.oracle_slopes)
              if args.oracle_var or args.oracle_model or args.oracle_slopes else None)
    sys.path.insert(0, str(HERE))
    sys.argv = [args.script, *rest]
    runpy.run_path(str(HERE / args.script), run_name="__main__")
    if oracle is not None:
        print(f"oracle variance: {len(oracle.var)} dense groups, {oracle.missed} groups not "
              "found (read by the noise model)")


if __name__ == "__main__":
    main()
