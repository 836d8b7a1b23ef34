"""The optimal learning rate of a loss-against-LR curve, and how each seed pulls on it.

Near its optimum the loss is modelled in log2 LR as a parabola,

    loss(x) = c + A (x - v)^2,

fitted by weighted least squares with tricube weights (1 - |t / W|^3)^3 of the distance
t = x - v in octaves, times each point's precision (1 / its variance, pointnoise.py) where that
is known. The window is centred on the optimum, not on a grid point: the fit is repeated with the
weights moved to the new vertex until it stops moving (a fixed point), so the same curve read
through a shifted grid gives nearly the same optimum, and points more than W octaves away never
enter. W follows the grid: WINDOW_STEPS of its steps, at least `window` octaves (grid_window).

Why a parabola, wide, and not an asymmetric bowl. Real curves rise faster above the optimum
than below, and a bowl with a fitted asymmetry (the linex c + A (e^{kt} - 1 - kt) 2/k^2 of
issue 19) is unbiased on a planted asymmetric curve; but on real seeds its fourth parameter
follows the LR-to-LR roughness of the curve (0.01-0.05 nats, common to all seeds), and so does
lr*: on dense store B the linex, even with its asymmetry's prior, moved lr* 0.10-0.14 octave
with the offset of a half-octave grid at 2-8 seeds, where this parabola moves it 0.03-0.11
(benchmarks/real_curves.py, benchmarks/README.md "lr* on real curves"). A wide window (five
steps, at least 2.5 octaves) averages that roughness out; the parabola's bias on an asymmetric
curve is the same wherever the grid sits, so it moves no answer with the grid. What it gives up:
lr* is the vertex of the best parabola through the window, which sits on the shallow side of a
lopsided curve's true minimum (a regret of a fraction of the curve's rise over the window).

With fewer than three points inside the window, or when the vertex is not bracketed by points
on both sides within the window (or the curve opens downward), the argmin itself is reported
(and the analysis calls it a bound when it lies on the edge of what trained).

Everything is vectorised over rows, so one call fits many curves that share their LRs (the
families of a benchmark, the leave-one-out refits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mutransfer.analysis_defaults import FIT_WINDOW

WINDOW_STEPS = 5.0     # the window: this many grid steps (grid_window), at least `window`
OUTER_ITERATIONS = 40  # moves of the window; a fixed point is reached in a handful
# window LRs on each side of lr* below which its note says the curve's rise there rests on one
# point (it still has an interval: on dense store B, intervals given also then held the dense
# lr* 0.95-1.00 of the time and came on 0.76-0.83 of the half-octave sub-grids, against
# 0.59-0.60 when they were withheld; benchmarks/README.md "lr* on real curves")
MIN_SIDE = 2
TOL = 1e-7             # octaves: the optimum has stopped moving
N_PARAMS = 3           # c, A, v


@dataclass
class OptimumFit:
    """One entry per row of the input (NaN / -1 where a row had no usable point)."""

    log2_lr: np.ndarray     # (B,) log2 of the optimal LR: the fitted optimum, else the argmin
    loss: np.ndarray        # (B,) loss at the optimum (the parabola's minimum, or the argmin's)
    argmin: np.ndarray      # (B,) index of the lowest usable point, -1 when none
    fitted: np.ndarray      # (B,) True where the fitted optimum is used
    n_points: np.ndarray    # (B,) points inside the window (positive weight)
    rss: np.ndarray         # (B,) weighted residual sum of squares of the fit; NaN without one
    params: np.ndarray      # (B, 3) c, A, v of the fitted parabola (NaN without one)
    weights: np.ndarray     # (B, L) the window's weights at the fixed point (0 outside)
    sides: np.ndarray       # (B,) the fewer of the window's LRs below and above the optimum

    def row(self, i: int) -> OptimumFit:
        """Row `i` as a one-row fit."""
        return OptimumFit(*(getattr(self, f)[i:i + 1] for f in self.__dataclass_fields__))


def tricube(t: np.ndarray) -> np.ndarray:
    t = np.minimum(np.abs(t), 1.0)
    return (1.0 - t**3) ** 3


def model(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """The fitted parabola at `x` (L,) for each row of `params` (B, 3)."""
    c, a, v = (params[:, i:i + 1] for i in range(3))
    return c + a * (x[None, :] - v) ** 2


def jacobian(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """(B, L, 3) derivatives of the parabola at `x` by c, A, v."""
    a, v = params[:, 1:2], params[:, 2:3]
    t = x[None, :] - v
    return np.stack([np.ones_like(t), t * t, -2.0 * a * t], axis=-1)


def _solve(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Batched h x = g, NaN rows where h is singular."""
    out = np.full(g.shape, np.nan)
    ok = np.isfinite(h).all(axis=(1, 2)) & np.isfinite(g).all(axis=1)
    if ok.any():
        det_ok = np.abs(np.linalg.det(h[ok])) > 1e-300
        idx = np.flatnonzero(ok)[det_ok]
        if len(idx):
            out[idx] = np.linalg.solve(h[idx], g[idx][..., None])[..., 0]
    return out


def _wrss(x, y, w, params):
    r = np.where(w > 0, np.nan_to_num(y) - model(x, params), 0.0)
    return (w * r * r).sum(axis=1)


def weighted_parabola(x: np.ndarray, y: np.ndarray, w: np.ndarray, v0: np.ndarray) -> np.ndarray:
    """(B, 3) c, A, v of the weighted least-squares parabola of each row (NaN where its
    weights hold fewer than three points, or they do not fix a parabola); `v0` (B,) centres
    the powers of x for round-off only."""
    u = x[None, :] - v0[:, None]
    yy = np.nan_to_num(y)
    s = [(w * u**p).sum(axis=1) for p in range(5)]
    t = [(w * u**p * yy).sum(axis=1) for p in range(3)]
    m = np.stack([np.stack([s[4], s[3], s[2]], -1), np.stack([s[3], s[2], s[1]], -1),
                  np.stack([s[2], s[1], s[0]], -1)], axis=1)
    a, b, c = _solve(m, np.stack([t[2], t[1], t[0]], axis=-1)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        vertex = -b / (2.0 * a)
    out = np.stack([c - a * vertex**2, a, v0 + vertex], axis=1)
    out[(w > 0).sum(axis=1) < 3] = np.nan
    return out


def _sides(x: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(B,) the fewer of the window's LRs below and above each row's optimum."""
    inside = w > 0
    below = (inside & (x[None, :] < v[:, None])).sum(axis=1)
    above = (inside & (x[None, :] > v[:, None])).sum(axis=1)
    return np.minimum(below, above)


def _window(x: np.ndarray, valid: np.ndarray, v: np.ndarray, window: np.ndarray) -> np.ndarray:
    return np.where(valid, tricube((x[None, :] - v[:, None]) / window[:, None]), 0.0)


def grid_window(log2_lr: np.ndarray, loss: np.ndarray, window: float = FIT_WINDOW) -> np.ndarray:
    """(B,) the window of each row: WINDOW_STEPS steps of its grid (the median spacing of the
    LRs it has), at least `window` octaves. On real curves a window of a fixed few steps is
    too narrow for fine grids and too short-handed for coarse ones: lr* then follows the
    LR-to-LR roughness of the curve, and so the grid's offset (dense store B, half-octave
    grids: a tricube of 2.5 steps moved lr* 0.12-0.16 octave with the offset, of 5 steps
    0.07-0.11; benchmarks/real_curves.py)."""
    x = np.asarray(log2_lr, dtype=float)
    out = np.full(len(loss), float(window))
    for i, row in enumerate(np.asarray(loss, dtype=float)):
        have = x[np.isfinite(row)]
        if len(have) > 1:
            out[i] = max(float(window), WINDOW_STEPS * float(np.median(np.diff(have))))
    return out


def fit_optimum(log2_lr: np.ndarray, loss: np.ndarray, window: float | np.ndarray = FIT_WINDOW,
                point_var: np.ndarray | None = None) -> OptimumFit:
    """Optimal log2 LR of each row of `loss` (B, L) over ascending `log2_lr` (L,).

    NaN marks a point that does not count (diverged, or never run). See the module docstring
    for the model; `window` is W, the half-width of the tricube window in octaves (one for
    every row, or (B,): grid_window gives one that follows each row's grid).
    `point_var` (B, L): the variance of each point (pointnoise.py); each point is then weighted
    by its inverse times the window (a row whose points all lack one weighs them alike: one
    seed). Without it, every point weighs alike.
    """
    x = np.asarray(log2_lr, dtype=float)
    y = np.asarray(loss, dtype=float)
    b = y.shape[0]
    valid = np.isfinite(y)
    precision = np.ones(y.shape)
    if point_var is not None:
        pv = np.broadcast_to(np.asarray(point_var, dtype=float), y.shape)
        known = np.isfinite(pv) & (pv > 0)
        rows = known.any(axis=1)
        valid = np.where(rows[:, None], valid & known, valid)
        precision = np.where(rows[:, None] & known, 1.0 / np.where(known, pv, 1.0), 1.0)
    y = np.where(valid, y, np.nan)
    has_any = valid.any(axis=1)
    argmin = np.where(has_any, np.argmin(np.where(valid, y, np.inf), axis=1), -1)
    v = x[np.maximum(argmin, 0)].astype(float)
    params = np.full((b, 3), np.nan)
    window = np.broadcast_to(np.asarray(window, dtype=float), (b,))
    w = _window(x, valid, v, window) * precision
    moving = has_any.copy()   # rows still moving their window; each row's path is its own
    for _ in range(OUTER_ITERATIONS):
        idx = np.flatnonzero(moving)
        if not len(idx):
            break
        vi = v[idx]
        fitted = weighted_parabola(x, y[idx], w[idx], vi)
        # a step at most half the window: a vertex far outside it is no place to look next
        moved = np.clip(fitted[:, 2] - vi, -window[idx] / 2, window[idx] / 2)
        new_v = np.where(np.isfinite(moved) & (fitted[:, 1] > 0), vi + moved, vi)
        params[idx] = fitted
        v[idx] = new_v
        w[idx] = _window(x, valid[idx], new_v, window[idx]) * precision[idx]
        moving[idx[~(np.abs(new_v - vi) >= TOL)]] = False
    return _finish(x, y, valid, has_any, argmin, params, w)


def _finish(x, y, valid, has_any, argmin, params, w) -> OptimumFit:
    """Keep a fitted optimum only where it is a minimum bracketed inside its window."""
    n_in = (w > 0).sum(axis=1)
    a, v = params[:, 1], params[:, 2]
    inside = np.where(w > 0, x[None, :], np.nan)
    with np.errstate(invalid="ignore"):
        below = (inside < v[:, None]).any(axis=1)
        above = (inside > v[:, None]).any(axis=1)
        ok = has_any & (n_in >= 3) & np.isfinite(params).all(axis=1) & (a > 0) & below & above
    # the argmin must not be an edge the fit runs past: a curve still falling at the last LR
    # that trained has no minimum to report, whatever a curve through it extrapolates
    last = np.where(valid, np.arange(len(x))[None, :], -1).max(axis=1)
    first = np.where(valid, np.arange(len(x))[None, :], len(x)).min(axis=1)
    ok &= (argmin != last) & (argmin != first)
    argmin_loss = np.take_along_axis(y, np.maximum(argmin, 0)[:, None], axis=1)[:, 0]
    params = np.where(ok[:, None], params, np.nan)
    log2_opt = np.where(ok, v, x[np.maximum(argmin, 0)])
    loss_opt = np.where(ok, params[:, 0], argmin_loss)
    rss = np.where(ok, _wrss(x, y, w, np.nan_to_num(params)), np.nan)
    sides = np.where(ok, _sides(x, w, np.nan_to_num(v)), 0)
    return OptimumFit(np.where(has_any, log2_opt, np.nan), np.where(has_any, loss_opt, np.nan),
                      argmin, ok, n_in, rss, params, np.where(ok[:, None], w, 0.0), sides)


def seed_deviations(log2_lr: np.ndarray, seed_loss: np.ndarray, fit: OptimumFit) -> np.ndarray:
    """How far each seed alone would move the optimum of one fitted curve: (S,) octaves.

    `seed_loss` (S, L) holds each seed's loss at the LRs (NaN where it has none) and `fit` the
    one-row fit of their (seed-adjusted) mean. Each seed's residuals from the fitted curve are
    projected on the fit's derivatives with the window's weights (one Gauss-Newton step from
    the fitted curve): the change of v a refit to that seed alone would make, to first order.
    A seed's constant offset is absorbed by c and never moves v. Their spread is the seeds'
    disagreement about the optimum: measurement noise of the points the fit uses and any
    seed-specific optimum alike (the analysis's interval, intervals.py). Residuals from the
    fitted curve, rather than from each LR's mean, also serve seeds that share no LR (one
    Optuna study per seed).
    """
    x = np.asarray(log2_lr, dtype=float)
    params, w = fit.params[:1], fit.weights[0]
    jac = jacobian(x, params)[0]                    # (L, 3)
    has = np.isfinite(seed_loss) & (w > 0)[None, :]
    resid = np.where(has, seed_loss - model(x, params), 0.0)
    out = np.full(len(seed_loss), np.nan)
    for s in range(len(seed_loss)):
        jw = jac * (w * has[s])[:, None]
        h = jw.T @ jac
        if np.linalg.matrix_rank(h) < N_PARAMS:
            continue
        out[s] = np.linalg.solve(h, jw.T @ resid[s])[-1]
    return out


def vertex_sensitivity(log2_lr: np.ndarray, fit: OptimumFit) -> np.ndarray | None:
    """(L,) dv/dy_j of one fitted row: how far the optimum moves per unit of point j's loss, to
    first order (the row of H^-1 J'W for v, W the window's weights); None without a fitted
    optimum or with a singular H."""
    if not fit.fitted[0]:
        return None
    jac = jacobian(np.asarray(log2_lr, dtype=float), fit.params[:1])[0]
    jw = jac * fit.weights[0][:, None]
    try:
        return (np.linalg.inv(jw.T @ jac) @ jw.T)[-1]
    except np.linalg.LinAlgError:
        return None


def model_variance(log2_lr: np.ndarray, fit: OptimumFit,
                   point_var: np.ndarray | None = None) -> float:
    """var(v) of one fitted row: the weighted fit's sandwich (H^-1 J'W V W J H^-1)_vv, i.e.
    sum_j (dv/dy_j)^2 V_j with V the points' variances `point_var` (L,) (per unit variance of a
    point without)."""
    sens = vertex_sensitivity(log2_lr, fit)
    if sens is None:
        return float("nan")
    w = fit.weights[0]
    var = np.ones_like(w) if point_var is None else \
        np.where(w > 0, np.nan_to_num(np.asarray(point_var, float)), 0.0)
    return float((sens * sens * var).sum())


def residual_variance(log2_lr: np.ndarray, loss: np.ndarray, fit: OptimumFit
                      ) -> tuple[float, float]:
    """(sum of w r^2, its expected value per unit noise variance: sum w (n - p) / n) of one
    fitted row, the residual noise estimate where there are no replicates."""
    if not fit.fitted[0]:
        return float("nan"), 0.0
    w = fit.weights[0]
    n = int((w > 0).sum())
    r = np.where(w > 0, np.nan_to_num(loss) - model(np.asarray(log2_lr, float),
                                                    fit.params[:1])[0], 0.0)
    return float((w * r * r).sum()), float(w.sum() * max(n - N_PARAMS, 0) / n)
