"""An lr* estimator that learns the curve's shape across the widths of a family (issue 27).

benchmarks/estimator_floor.py shows that knowing a cell's shape (a template from other seeds)
lowers the one-octave offset spread of lr* at 2 seeds from main's 0.25-0.26 to 0.14-0.19 on
dense stores B and D. A user's sweep has no other seeds, but it has other widths: on the dense
stores the parabola's curvature A is nearly the same at every width of a family (B 0.061-0.072,
C 0.043-0.049, D 0.053-0.066 nats per octave^2). So here every width of a family is read as

    loss_i(x) = c_i + A 2 (e^{k t} - 1 - k t) / k^2,   t = x - v_i,

a linex whose asymmetry k and curvature A the family's widths share, each width its own level
c_i and location v_i (lr* = v_i). k has a Gaussian prior K_PRIOR +- K_SD, centred on the dense
stores' asymmetries (benchmarks/README.md "The curves' shape": per cell -0.3..+0.6 at W 2.5,
-0.4..+0.2 at W 3.5, on B and C). Fitted by weighted least squares, each LR weighted by its
mean's variance (optimum.seed_variance: the analysis's shrunk per-LR seed variance, read from
main's window) times the analysis's tricube window (fit.grid_window), moved to each v_i until
the fit stops: in turn k and A (with the c_i) given the v_i, then each v_i (with c_i) given
k and A. It starts from main's answer; a width whose main fit has no fitted optimum, or an
edge, keeps main's answer and takes no part (a family with fewer than two such widths keeps
main's answers). No interval (NaN); drift is the least-squares slope of lr* on log2 width.

    python benchmarks/real_curves.py STORES/real_B --est new eb4c8ec shared
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import mutransfer.analysis.optimum as optimum  # by module: estimator_variants patches it
from mutransfer.analysis.choice import resolve
from mutransfer.analysis.fit import grid_window, tricube
from mutransfer.analysis.groups import prepare
from mutransfer.analysis_defaults import FIT_WINDOW

K_PRIOR = 0.1      # the prior's centre: the dense stores' asymmetry
K_SD = 0.3         # its sd: their range, -0.3..+0.6
K_GRID = np.round(np.arange(-1.0, 1.5001, 0.05), 2)
SHIFT = 1.0        # octaves: each v_i is searched within +-this of its last value per round
SHIFT_STEP = 1 / 256
ROUNDS = 40
TOL = 1e-4         # octaves: the v_i have stopped moving


def linex(t: np.ndarray, k: float) -> np.ndarray:
    """The linex shape 2 (e^{kt} - 1 - kt) / k^2 (k > 0: steeper above t = 0), t^2 at k = 0:
    the one curve of fixed asymmetry every benchmark of this folder reads."""
    return t * t if abs(k) < 1e-9 else 2.0 * (np.expm1(k * t) - k * t) / (k * k)


def shape_step(x, y, w, v, ks=K_GRID) -> tuple[float, float]:
    """(k, A) given the v_i: the c_i profiled out, k the penalized best of `ks`."""
    best = (np.inf, K_PRIOR, np.nan)
    for k in ks:
        num = den = 0.0
        parts = []
        for xi, yi, wi, vi in zip(x, y, w, v):
            g = linex(xi - vi, k)
            gc = g - (wi * g).sum() / wi.sum()
            yc = yi - (wi * yi).sum() / wi.sum()
            num += (wi * gc * yc).sum()
            den += (wi * gc * gc).sum()
            parts.append((gc, yc, wi))
        a = num / den
        if not a > 0:
            continue
        rss = sum((wi * (yc - a * gc) ** 2).sum() for gc, yc, wi in parts)
        rss += (k - K_PRIOR) ** 2 / K_SD**2
        if rss < best[0]:
            best = (rss, float(k), float(a))
    return best[1], best[2]


def location_step(x, y, w, v, k, a) -> float:
    """One width's v given k and A (its c profiled out): the best shift on a fine grid, refined
    by a parabola through the best three."""
    shifts = v + np.arange(-SHIFT, SHIFT + SHIFT_STEP / 2, SHIFT_STEP)
    r = y[None, :] - a * linex(x[None, :] - shifts[:, None], k)
    c = (r * w).sum(1) / w.sum()
    rss = ((r - c[:, None]) ** 2 * w).sum(1)
    i = int(np.argmin(rss))
    if 0 < i < len(shifts) - 1:
        lo, mid, hi = rss[i - 1:i + 2]
        if lo - 2 * mid + hi > 0:
            return float(shifts[i] + 0.5 * (lo - hi) / (lo - 2 * mid + hi) * SHIFT_STEP)
    return float(shifts[i])


def family_fit(x, y, prec, window, v0, ks=K_GRID) -> tuple[np.ndarray, float, float]:
    """(the v_i, k, A) of one family's widths (lists of arrays: LRs, mean curve, precision;
    windows; main's lr* to start from; the asymmetries allowed); (v0, NaN, NaN) where no
    curve opens upward."""
    v, k, a = np.array(v0, float), np.nan, np.nan
    for _ in range(ROUNDS):
        w = [tricube((xi - vi) / wi) * pi for xi, vi, wi, pi in zip(x, v, window, prec)]
        k, a = shape_step(x, y, w, v, ks)
        if not np.isfinite(a):
            return np.array(v0, float), np.nan, np.nan
        new = np.array([location_step(xi, yi, wi, vi, k, a)
                        for xi, yi, wi, vi in zip(x, y, w, v)])
        done = np.abs(new - v).max() < TOL
        v = new
        if done:
            break
    return v, k, a


def answers(trials: pd.DataFrame, ks=K_GRID) -> tuple[pd.DataFrame, pd.DataFrame]:
    """real_curves.py's (lr* table, drift table) of one parameterization's trials, the linex
    asymmetry one of `ks` (ks = [0]: a parabola whose curvature the widths share)."""
    prep = prepare(trials, resolve(trials, None, None, {}))
    optima = optimum.group_optima(prep, FIT_WINDOW)
    lr_opt, _ = optimum.optimum_tables(optima, prep.group_cols)
    main = dict(zip(zip(*(lr_opt[c] for c in prep.group_cols)), np.log2(lr_opt["lr_opt"])))
    edge = dict(zip(zip(*(lr_opt[c] for c in prep.group_cols)), lr_opt["edge"].astype(bool)))
    out = dict(main)
    families: dict[tuple, list] = {}
    for g in optima:
        if g.fit.fitted[0] and not edge[g.key]:
            families.setdefault(g.key[:-1], []).append(g)
    for members in families.values():
        if len(members) < 2:
            continue
        x, y, prec, window = [], [], [], []
        for g in members:
            curve = g.stats.usable_loss[0]
            inside = g.fit.weights[0] > 0
            var = optimum.seed_variance(g.arrays, g.stats, inside) / g.stats.n_loss[0]
            ok = np.isfinite(curve) & np.isfinite(var) & (var > 0)
            x.append(g.arrays.log2_lr[ok])
            y.append(curve[ok])
            prec.append(1.0 / var[ok])
            window.append(float(grid_window(g.arrays.log2_lr, curve[None, :], FIT_WINDOW)[0]))
        v, _, _ = family_fit(x, y, prec, window, [main[g.key] for g in members], ks)
        out.update({g.key: float(vi) for g, vi in zip(members, v)})
    keys = list(zip(*(lr_opt[c] for c in prep.group_cols)))
    opt = pd.DataFrame({"width": lr_opt["width"], "log2_opt": [out[k] for k in keys],
                        "log2_lo": np.nan, "log2_hi": np.nan, "edge": lr_opt["edge"]})
    rows = []
    for _, fam in opt.groupby([lr_opt[c] for c in prep.family_cols] or np.zeros(len(opt))):
        usable = fam[~fam["edge"].astype(bool)]
        slope = (np.polyfit(np.log2(usable["width"].astype(float)), usable["log2_opt"], 1)[0]
                 if usable["width"].nunique() > 1 else np.nan)
        rows.append({"slope": slope, "lo": np.nan, "hi": np.nan,
                     "edge": bool(fam["edge"].any())})
    return opt, pd.DataFrame(rows)
