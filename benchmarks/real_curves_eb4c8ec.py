"""The lr* estimator of commit eb4c8ec, copied for benchmarks/real_curves.py only (the floor a
new estimator must beat on real curves). Not part of the package: nothing imports it but the
benchmark.

What it did (git show eb4c8ec:mutransfer/analysis/fit.py, intervals.py, optimum.py): a parabola
in log2 LR through the 5 usable LRs nearest the argmin (and any others within 1 octave), its
vertex when it opens upward inside their span, else the argmin; the interval is a parametric
bootstrap: the group's own pooled noise (residuals of loss = cell mean + seed offset, (LRs - 1)
x (seeds - 1) df; without replicates the parabola's residuals), 1000 draws of the curve with
that noise (scaled by sqrt(df / chi2_df)), refitted, 2.5-97.5 percentiles. Its drift slope is
the least-squares slope of the widths' lr*; its interval here is the percentiles of the slope
over the widths' paired noise draws (each width's draws are independent).
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import pandas as pd

from mutransfer.analysis.cells import all_seeds, cell_stats, seed_lr_arrays
from mutransfer.analysis.groups import Prepared, as_key
from mutransfer.analysis.optimum import edge_of, family_grids

K, WINDOW, N_DRAWS, MIN_NOISE_DF = 5, 1.0, 1000, 3


class _Fit:
    def __init__(self, log2_lr, loss, argmin, n_points, rss):
        self.log2_lr, self.loss, self.argmin, self.n_points, self.rss = \
            log2_lr, loss, argmin, n_points, rss


def _quadratic(u, y, sel):
    w = sel.astype("float64")
    u = np.where(sel, u, 0.0)
    y = np.where(sel, y, 0.0)
    s = [(w * u**p).sum(axis=1) for p in range(5)]
    t = [(w * u**p * y).sum(axis=1) for p in range(3)]
    m = np.stack([np.stack([s[4], s[3], s[2]], -1), np.stack([s[3], s[2], s[1]], -1),
                  np.stack([s[2], s[1], s[0]], -1)], axis=1)
    rhs = np.stack([t[2], t[1], t[0]], axis=-1)
    coef = np.full(rhs.shape, np.nan)
    ok = sel.sum(axis=1) >= 3
    if ok.any():
        coef[ok] = np.linalg.solve(m[ok], rhs[ok][..., None])[..., 0]
    return coef


def fit_optimum(log2_lr: np.ndarray, loss: np.ndarray) -> _Fit:
    valid = np.isfinite(loss)
    has_any = valid.any(axis=1)
    argmin = np.where(has_any, np.argmin(np.where(valid, loss, np.inf), axis=1), -1)
    x0 = log2_lr[np.maximum(argmin, 0)]
    dist = np.where(valid, np.abs(log2_lr[None, :] - x0[:, None]), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :K]
    sel = dist <= WINDOW
    np.put_along_axis(sel, order, True, axis=1)
    sel &= valid
    u = log2_lr[None, :] - x0[:, None]
    a, b, c = _quadratic(u, loss, sel).T
    span_lo = np.where(sel, u, np.inf).min(axis=1)
    span_hi = np.where(sel, u, -np.inf).max(axis=1)
    two_sided = (span_lo < 0) & (span_hi > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        vertex = -b / (2 * a)
        inside = (a > 0) & two_sided & (vertex >= span_lo) & (vertex <= span_hi)
    pred = a[:, None] * u**2 + b[:, None] * u + c[:, None]
    rss = np.where(sel, np.nan_to_num(loss) - pred, 0.0)
    rss = np.where(np.isfinite(a), (rss**2).sum(axis=1), np.nan)
    log2_opt = np.where(has_any, np.where(inside, x0 + vertex, x0), np.nan)
    return _Fit(log2_opt, None, argmin, sel.sum(axis=1), rss)


def _components(mask):
    seeds = np.flatnonzero(mask.any(axis=1))
    share = (mask.astype(int) @ mask.T.astype(int)) > 0
    seen: set[int] = set()
    n = 0
    for s in seeds:
        if s in seen:
            continue
        n += 1
        stack = [s]
        while stack:
            t = stack.pop()
            if t not in seen:
                seen.add(t)
                stack += [u for u in np.flatnonzero(share[t]) if u not in seen]
    return n


def _noise_sd(arr, stats, fit) -> tuple[np.ndarray, int]:
    """(sd of each cell mean, df) of the pooled noise, else the fit's; (NaNs, 0) without."""
    usable = stats.usable[0]
    n = arr.n_loss * usable[None]
    pred = np.nan_to_num(stats.mean_loss[0])[None] + stats.offsets[0][:, None]
    rss = float(np.where(n > 0, arr.loss_sq - 2 * pred * arr.loss_sum + n * pred**2, 0.0).sum())
    mask = n > 0
    df = int(n.sum()) - (int(usable.sum()) + int(mask.any(axis=1).sum()) - _components(mask))
    if df >= MIN_NOISE_DF:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(usable, np.sqrt(max(rss, 0.0) / df / stats.n_loss[0]), np.nan), df
    df_fit = int(fit.n_points[0]) - 3
    if df_fit >= MIN_NOISE_DF and np.isfinite(fit.rss[0]):
        return np.where(usable, np.sqrt(fit.rss[0] / df_fit), np.nan), df_fit
    return np.full(len(usable), np.nan), 0


def _rng(key: tuple) -> np.random.Generator:
    text = json.dumps([str(v) for v in key])
    return np.random.default_rng([0, zlib.crc32(text.encode()), 1])


def group_answer(group: pd.DataFrame, key: tuple, lrs: np.ndarray) -> dict:
    arr = seed_lr_arrays(group, lrs)
    stats = cell_stats(arr, all_seeds(arr))
    curve = stats.usable_loss
    fit = fit_optimum(arr.log2_lr, curve)
    side, _ = edge_of(stats, fit)
    sd, df = _noise_sd(arr, stats, fit)
    draws = np.full(N_DRAWS, np.nan)
    if not side and fit.argmin[0] >= 0 and df > 0:
        rng = _rng(key)
        scale = np.sqrt(df / rng.chisquare(df, N_DRAWS))
        y = curve + scale[:, None] * sd[None, :] * rng.standard_normal((N_DRAWS, curve.shape[1]))
        draws = fit_optimum(arr.log2_lr, y).log2_lr
    finite = draws[np.isfinite(draws)]
    lo, hi = np.percentile(finite, (2.5, 97.5)) if len(finite) else (np.nan, np.nan)
    return {"log2_opt": float(fit.log2_lr[0]), "log2_lo": float(lo), "log2_hi": float(hi),
            "edge": bool(side), "draws": draws}


def answers(prep: Prepared) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lr* per group, drift per family) in the benchmark's columns."""
    grids = family_grids(prep)
    rows = []
    for key, group in prep.trials.groupby(prep.group_cols, sort=True, dropna=False):
        key = as_key(key)
        rows.append({**dict(zip(prep.group_cols, key)),
                     **group_answer(group, key, grids.get(key[:-1]))})
    opt = pd.DataFrame(rows)
    drift = []
    for fam_key, fam in opt.groupby(prep.family_cols or (lambda _: 0), sort=True):
        fam = fam.sort_values("width")
        x = np.log2(fam["width"].to_numpy(float))
        xc = (x - x.mean()) / ((x - x.mean())**2).sum()
        slope = float(xc @ fam["log2_opt"].to_numpy())
        lo = hi = np.nan
        if not fam["edge"].any() and len(fam) >= 2:
            d = np.vstack(fam["draws"].to_list())
            s = xc @ d
            s = s[np.isfinite(s)]
            if len(s) > N_DRAWS // 2:
                lo, hi = np.percentile(s, (2.5, 97.5))
        drift.append({**dict(zip(prep.family_cols, as_key(fam_key))), "slope": slope,
                      "lo": float(lo), "hi": float(hi), "edge": bool(fam["edge"].any())})
    return opt.drop(columns="draws"), pd.DataFrame(drift)
