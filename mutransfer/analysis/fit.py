"""The optimal learning rate of a loss-against-LR curve, and how each seed pulls on it.

Real loss curves are asymmetric in log2 LR: they rise a few times faster one octave above the
optimum than one octave below (the loss climbs towards instability above, and falls slowly with
more LR below). A parabola through points around the argmin is biased by that asymmetry, and by
how many grid points happen to lie on each side. So the curve is modelled near its optimum as

    loss(x) = c + A * phi_k(x - v),   phi_k(t) = 2 (exp(k t) - 1 - k t) / k^2

(a "linex" bowl: phi_k(t) = t^2 + k t^3 / 3 + ..., a parabola at k = 0; k > 0 rises faster
above the optimum v, k < 0 below), fitted by weighted least squares with tricube weights
(1 - |t / W|^3)^3 of the distance t = x - v in octaves. The window is centred on the optimum,
not on a grid point: the fit is repeated with the weights moved to the new optimum until it
stops moving (a fixed point), so the same curve read through a shifted or a denser grid gives
the same optimum, and points more than W octaves away never enter.

With fewer than four points inside the window the shape is fixed at k = 0 (a parabola: three
parameters); with fewer than three, or when the fitted optimum is not bracketed by points on
both sides within the window, the argmin itself is reported (and the analysis calls it a bound
when it lies on the edge of what trained).

Everything is vectorised over rows, so one call fits many curves that share their LRs (the
families of a coverage benchmark, the planted tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mutransfer.analysis_defaults import FIT_WINDOW

# the asymmetry's prior N(K_PRIOR_MEAN, K_PRIOR_SD^2) where each point's variance is known: the
# dense real curves' k (quickstart model, sp and mup_ssm at widths 64 and 256) is 0.13-0.55
K_PRIOR_MEAN = 0.35
K_PRIOR_SD = 0.5
WINDOW_STEPS = 2.5   # the window: this many grid steps (grid_window) ...
WINDOW_MIN = 1.5     # ... and at least this many octaves
K_MAX = 4.0          # |k| at most: a rise e^4 ~ 55x steeper one octave up than a parabola's
OUTER_ITERATIONS = 40  # moves of the window; a fixed point is reached in a handful
INNER_ITERATIONS = 40  # Levenberg-Marquardt steps per window
MIN_SIDE = 2         # window LRs needed on each side of the optimum to fit its asymmetry
TOL = 1e-7           # octaves: the optimum has stopped moving
N_PARAMS = {"linex": 4, "parabola": 3}


@dataclass
class OptimumFit:
    """One entry per row of the input (NaN / -1 where a row had no usable point)."""

    log2_lr: np.ndarray     # (B,) log2 of the optimal LR: the fitted optimum, else the argmin
    loss: np.ndarray        # (B,) loss at the optimum (the curve's minimum, or the argmin's)
    argmin: np.ndarray      # (B,) index of the lowest usable point, -1 when none
    fitted: np.ndarray      # (B,) True where the fitted optimum is used
    n_points: np.ndarray    # (B,) points inside the window (positive weight)
    rss: np.ndarray         # (B,) weighted residual sum of squares of the fit; NaN without one
    params: np.ndarray      # (B, 4) c, A, k, v of the fitted curve (NaN without one)
    weights: np.ndarray     # (B, L) the window's weights at the fixed point (0 outside)
    shape: np.ndarray       # (B,) "linex", "parabola" or "" (no fitted optimum)
    sides: np.ndarray       # (B,) the fewer of the window's LRs below and above the optimum

    def row(self, i: int) -> OptimumFit:
        """Row `i` as a one-row fit."""
        return OptimumFit(*(getattr(self, f)[i:i + 1] for f in self.__dataclass_fields__))


def tricube(t: np.ndarray) -> np.ndarray:
    t = np.minimum(np.abs(t), 1.0)
    return (1.0 - t**3) ** 3


def phi(t: np.ndarray, k: np.ndarray) -> np.ndarray:
    """2 (e^{kt} - 1 - kt) / k^2, with its series where kt is small (t^2 at k = 0)."""
    kt = k * t
    small = np.abs(kt) < 1e-3
    safe_k = np.where(small, 1.0, k)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = 2.0 * (np.expm1(kt) - kt) / safe_k**2
    return np.where(small, t * t * (1.0 + kt / 3.0 + kt * kt / 12.0), exact)


def _dphi_dt(t: np.ndarray, k: np.ndarray) -> np.ndarray:
    kt = k * t
    small = np.abs(kt) < 1e-3
    safe_k = np.where(small, 1.0, k)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = 2.0 * np.expm1(kt) / safe_k
    return np.where(small, 2.0 * t * (1.0 + kt / 2.0 + kt * kt / 6.0), exact)


def _dphi_dk(t: np.ndarray, k: np.ndarray) -> np.ndarray:
    kt = k * t
    small = np.abs(kt) < 1e-2
    safe_k = np.where(small, 1.0, k)
    with np.errstate(over="ignore", invalid="ignore"):
        # d/dk [2 (e^{kt} - 1 - kt) / k^2] = 2 (t e^{kt} - t) / k^2 - 4 (e^{kt} - 1 - kt) / k^3
        exact = (2.0 * t * np.expm1(kt) / safe_k**2
                 - 4.0 * (np.expm1(kt) - kt) / safe_k**3)
    return np.where(small, t**3 / 3.0 + k * t**4 / 6.0 + k * k * t**5 / 20.0, exact)


def model(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """The fitted curve at `x` (L,) for each row of `params` (B, 4)."""
    c, a, k, v = (params[:, i:i + 1] for i in range(4))
    return c + a * phi(x[None, :] - v, k)


def jacobian(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """(B, L, 4) derivatives of the curve at `x` by c, A, k, v."""
    c, a, k, v = (params[:, i:i + 1] for i in range(4))
    t = x[None, :] - v
    return np.stack([np.ones_like(t), phi(t, k), a * _dphi_dk(t, k), -a * _dphi_dt(t, k)],
                    axis=-1)


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


def _wrss(x, y, w, params, penalty=None):
    with np.errstate(over="ignore", invalid="ignore"):
        # a wild trial step may overflow: its cost is then inf and the step is refused
        r = np.where(w > 0, np.nan_to_num(y) - model(x, params), 0.0)
        out = (w * r * r).sum(axis=1)
    if penalty is not None:
        out = out + penalty * (params[:, 2] - K_PRIOR_MEAN) ** 2
    return out


def _parabola_start(x: np.ndarray, y: np.ndarray, w: np.ndarray, v0: np.ndarray) -> np.ndarray:
    """(c, A, 0, v) of the weighted parabola through the window: the linex fit's start, and the
    fit itself where the window holds three points only."""
    u = x[None, :] - v0[:, None]
    yy = np.nan_to_num(y)
    s = [(w * u**p).sum(axis=1) for p in range(5)]
    t = [(w * u**p * yy).sum(axis=1) for p in range(3)]
    m = np.stack([np.stack([s[4], s[3], s[2]], -1), np.stack([s[3], s[2], s[1]], -1),
                  np.stack([s[2], s[1], s[0]], -1)], axis=1)
    a, b, c = _solve(m, np.stack([t[2], t[1], t[0]], axis=-1)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        vertex = -b / (2.0 * a)
    return np.stack([c - a * vertex**2, a, np.zeros_like(a), v0 + vertex], axis=1)


def _levenberg_marquardt(x, y, w, params, free_k, penalty):
    """Weighted least squares of the linex curve at fixed weights, from `params`; rows stop
    once a step no longer lowers their cost by a relative 1e-12."""
    params = params.copy()
    lam = np.full(len(params), 1e-3)
    cost = _wrss(x, y, w, params, penalty)
    active = np.isfinite(cost) & ((w > 0).sum(axis=1) >= 3)
    for _ in range(INNER_ITERATIONS):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        p, wi, yi, pen = params[idx], w[idx], y[idx], penalty[idx]
        jac = jacobian(x, p)
        jac[~free_k[idx], :, 2] = 0.0
        r = np.where(wi > 0, np.nan_to_num(yi) - model(x, p), 0.0)
        jw = jac * wi[..., None]
        h = np.einsum("blp,blq->bpq", jw, jac)
        g = np.einsum("blp,bl->bp", jw, r)
        h[:, 2, 2] += pen
        g[:, 2] -= pen * (p[:, 2] - K_PRIOR_MEAN)
        diag = np.maximum(np.einsum("bpp->bp", h), 1e-12)
        h_damped = h + lam[idx, None, None] * np.eye(4)[None] * diag[:, :, None]
        h_damped[~free_k[idx], 2, 2] = 1.0
        trial = p + np.nan_to_num(_solve(h_damped, g))
        trial[:, 2] = np.clip(trial[:, 2], -K_MAX, K_MAX)
        new_cost = _wrss(x, yi, wi, trial, pen)
        better = np.isfinite(new_cost) & (new_cost <= cost[idx])
        gain = np.where(better, cost[idx] - new_cost, 0.0)
        params[idx] = np.where(better[:, None], trial, p)
        cost[idx] = np.where(better, new_cost, cost[idx])
        lam[idx] = np.where(better, lam[idx] * 0.3, lam[idx] * 10.0)
        done = (better & (gain <= 1e-12 * np.maximum(cost[idx], 1e-300))) | (lam[idx] > 1e10)
        active[idx[done]] = False
    return params


def _sides(x: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(B,) the fewer of the window's LRs below and above each row's optimum."""
    inside = w > 0
    below = (inside & (x[None, :] < v[:, None])).sum(axis=1)
    above = (inside & (x[None, :] > v[:, None])).sum(axis=1)
    return np.minimum(below, above)


def _shape_is_free(x: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether the asymmetry k is fitted: four points in the window, two on each side (one
    LR on a side fixes nothing of that side's shape; k then stays 0, a parabola)."""
    return ((w > 0).sum(axis=1) >= 4) & (_sides(x, w, v) >= MIN_SIDE)


def _window(x: np.ndarray, valid: np.ndarray, v: np.ndarray, window: np.ndarray) -> np.ndarray:
    return np.where(valid, tricube((x[None, :] - v[:, None]) / window[:, None]), 0.0)


def grid_window(log2_lr: np.ndarray, loss: np.ndarray, window: float = FIT_WINDOW) -> np.ndarray:
    """(B,) the window of each row: WINDOW_STEPS steps of its grid (the median spacing of the
    LRs it has), at least WINDOW_MIN octaves and at most `window`. Real curves are not linex
    bowls five octaves wide: a half-octave grid read through +-2.5 octaves moved lr* 0.05-0.09
    octave with the grid's offset on the dense quickstart sweep, through +-1.5 octaves
    0.04-0.05; a one-octave grid needs the wider window to have two LRs on each side."""
    x = np.asarray(log2_lr, dtype=float)
    out = np.full(len(loss), float(window))
    for i, row in enumerate(np.asarray(loss, dtype=float)):
        have = x[np.isfinite(row)]
        if len(have) > 1:
            step = float(np.median(np.diff(have)))
            out[i] = min(window, max(WINDOW_MIN, WINDOW_STEPS * step))
    return out


def fit_optimum(log2_lr: np.ndarray, loss: np.ndarray, window: float | np.ndarray = FIT_WINDOW,
                noise_var: np.ndarray | None = None,
                point_var: np.ndarray | None = None) -> OptimumFit:
    """Optimal log2 LR of each row of `loss` (B, L) over ascending `log2_lr` (L,).

    NaN marks a point that does not count (diverged, or never run). See the module docstring
    for the model; `window` is W, the half-width of the tricube window in octaves (one for
    every row, or (B,): grid_window gives one that follows each row's grid).
    `point_var` (B, L): the variance of each point (pointnoise.py); each point is then weighted
    by its inverse times the window, and the asymmetry has its prior N(K_PRIOR_MEAN,
    K_PRIOR_SD^2) (the weighted residuals are then in units of their variance). Without it,
    every point weighs alike and `noise_var` (B,), a point's variance, sets the prior's weight
    (none without either).
    """
    x = np.asarray(log2_lr, dtype=float)
    y = np.asarray(loss, dtype=float)
    b = y.shape[0]
    valid = np.isfinite(y)
    precision = np.ones(y.shape)
    penalty = (np.zeros(b) if noise_var is None
               else np.nan_to_num(np.broadcast_to(noise_var, (b,)) / K_PRIOR_SD**2))
    if point_var is not None:  # rows whose points all lack a variance weigh alike (one seed)
        pv = np.broadcast_to(np.asarray(point_var, dtype=float), y.shape)
        known = np.isfinite(pv) & (pv > 0)
        rows = known.any(axis=1)
        valid = np.where(rows[:, None], valid & known, valid)
        precision = np.where(rows[:, None] & known, 1.0 / np.where(known, pv, 1.0), 1.0)
        penalty = np.where(rows, 1.0 / K_PRIOR_SD**2, penalty)
    y = np.where(valid, y, np.nan)
    has_any = valid.any(axis=1)
    argmin = np.where(has_any, np.argmin(np.where(valid, y, np.inf), axis=1), -1)
    v = x[np.maximum(argmin, 0)].astype(float)
    params = np.full((b, 4), np.nan)
    window = np.broadcast_to(np.asarray(window, dtype=float), (b,))
    w = _window(x, valid, v, window) * precision
    moving = has_any.copy()   # rows still moving their window; each row's path is its own
    for it in range(OUTER_ITERATIONS):
        idx = np.flatnonzero(moving)
        if not len(idx):
            break
        wi, vi = w[idx], v[idx]
        n_in = (wi > 0).sum(axis=1)
        start = _parabola_start(x, y[idx], wi, vi)
        if it > 0:  # warm start from the last window's curve where it had one
            start = np.where(np.isfinite(params[idx]).all(axis=1)[:, None], params[idx], start)
        fitted = _levenberg_marquardt(x, y[idx], wi, np.nan_to_num(start),
                                      _shape_is_free(x, wi, vi), penalty[idx])
        fitted[n_in < 3] = np.nan
        moved = np.clip(fitted[:, 3] - vi, -window[idx] / 2, window[idx] / 2)
        new_v = np.where(np.isfinite(moved), vi + moved, vi)
        params[idx] = fitted
        v[idx] = new_v
        w[idx] = _window(x, valid[idx], new_v, window[idx]) * precision[idx]
        moving[idx[~(np.abs(new_v - vi) >= TOL)]] = False
    return _finish(x, y, valid, has_any, argmin, params, w)


def _finish(x, y, valid, has_any, argmin, params, w) -> OptimumFit:
    """Keep a fitted optimum only where it is a minimum bracketed inside its window."""
    n_in = (w > 0).sum(axis=1)
    v, a = params[:, 3], params[:, 1]
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
    shape = np.where(ok, np.where(_shape_is_free(x, w, np.nan_to_num(v)), "linex", "parabola"),
                     "")
    sides = np.where(ok, _sides(x, w, np.nan_to_num(v)), 0)
    return OptimumFit(np.where(has_any, log2_opt, np.nan), np.where(has_any, loss_opt, np.nan),
                      argmin, ok, n_in, rss, params, np.where(ok[:, None], w, 0.0), shape, sides)


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
    cols = [0, 1, 3] if N_PARAMS[str(fit.shape[0])] == 3 else [0, 1, 2, 3]
    jac = jacobian(x, params)[0][:, cols]          # (L, p)
    has = np.isfinite(seed_loss) & (w > 0)[None, :]
    resid = np.where(has, seed_loss - model(x, params), 0.0)
    out = np.full(len(seed_loss), np.nan)
    for s in range(len(seed_loss)):
        jw = jac * (w * has[s])[:, None]
        h = jw.T @ jac
        if np.linalg.matrix_rank(h) < len(cols):
            continue
        out[s] = np.linalg.solve(h, jw.T @ resid[s])[-1]
    return out


def model_variance(log2_lr: np.ndarray, fit: OptimumFit,
                   point_var: np.ndarray | None = None) -> float:
    """var(v) of one fitted row: the weighted fit's sandwich (H^-1 J'W V W J H^-1)_vv, with V
    the points' variances `point_var` (L,) (per unit variance of a point without)."""
    x = np.asarray(log2_lr, dtype=float)
    if not fit.fitted[0]:
        return float("nan")
    cols = [0, 1, 3] if N_PARAMS[str(fit.shape[0])] == 3 else [0, 1, 2, 3]
    jac = jacobian(x, fit.params[:1])[0][:, cols]
    w = fit.weights[0][:, None]
    var = np.ones_like(w) if point_var is None else \
        np.where(w > 0, np.nan_to_num(np.asarray(point_var, float))[:, None], 0.0)
    h = (jac * w).T @ jac
    if fit.shape[0] == "linex" and point_var is not None:
        h[2, 2] += 1.0 / K_PRIOR_SD**2  # the prior on k is information too
    try:
        h_inv = np.linalg.inv(h)
    except np.linalg.LinAlgError:
        return float("nan")
    return float((h_inv @ ((jac * w * w * var).T @ jac) @ h_inv)[-1, -1])


def residual_variance(log2_lr: np.ndarray, loss: np.ndarray, fit: OptimumFit
                      ) -> tuple[float, float]:
    """(sum of w r^2, its expected value per unit noise variance: sum w (n - p) / n) of one
    fitted row, the residual noise estimate where there are no replicates."""
    if not fit.fitted[0]:
        return float("nan"), 0.0
    w = fit.weights[0]
    n = int((w > 0).sum())
    p = N_PARAMS[str(fit.shape[0])]
    r = np.where(w > 0, np.nan_to_num(loss) - model(np.asarray(log2_lr, float),
                                                    fit.params[:1])[0], 0.0)
    return float((w * r * r).sum()), float(w.sum() * max(n - p, 0) / n)


def slope(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """d loss / d log2 LR of the fitted curves (B, 4) at points x (B, N)."""
    a, k, v = params[:, 1:2], params[:, 2:3], params[:, 3:4]
    return a * _dphi_dt(x - v, k)


def slope_gradient(x: np.ndarray, params: np.ndarray) -> np.ndarray:
    """(B, N, 4) derivatives of `slope` by c, A, k, v."""
    a, k, v = params[:, 1:2], params[:, 2:3], params[:, 3:4]
    t = x - v
    kt = k * t
    small = np.abs(kt) < 1e-2
    safe_k = np.where(small, 1.0, k)
    with np.errstate(over="ignore", invalid="ignore"):
        d_k = 2.0 * t * np.exp(kt) / safe_k - 2.0 * np.expm1(kt) / safe_k**2
    d_k = np.where(small, t * t + 2.0 * k * t**3 / 3.0 + k * k * t**4 / 4.0, d_k)
    curv = 2.0 * np.exp(kt)
    return np.stack([np.zeros_like(t), _dphi_dt(t, k), a * d_k, -a * curv], axis=-1)
