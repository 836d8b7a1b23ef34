"""The optimal learning rate of a loss-against-LR curve: a quadratic in log2 LR near the argmin.

Vectorised over rows so one call fits the observed curve and every bootstrap resample of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class OptimumFit:
    """One entry per row of the input (NaN / -1 where a row had no usable point)."""

    log2_lr: np.ndarray     # (B,) log2 of the optimal LR
    loss: np.ndarray        # (B,) loss at the optimum: parabola's minimum, or the argmin's loss
    argmin: np.ndarray      # (B,) index of the lowest usable point, -1 when none
    quadratic: np.ndarray   # (B,) True where the parabola's vertex was used
    n_points: np.ndarray    # (B,) points that entered the fit
    rss: np.ndarray         # (B,) the parabola's sum of squared residuals; NaN without one


def _nearest_mask(x: np.ndarray, x0: np.ndarray, valid: np.ndarray, k: int,
                  window: float) -> np.ndarray:
    """The k usable points nearest (in log2 LR) to each row's argmin, and any others within
    `window` octaves of it.

    On a grid in half-octave or coarser steps this is the argmin and its neighbours, two on
    each side for k = 5 (more on one side near the grid's edge). Optuna's irregular LRs can be
    dense: k nearest points would then span a fraction of an octave, where the loss rises less
    than its noise, so the window keeps at least +-1 octave in the fit.
    """
    dist = np.where(valid, np.abs(x[None, :] - x0[:, None]), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    mask = dist <= window
    np.put_along_axis(mask, order, True, axis=1)
    return mask & valid


def _quadratic(u: np.ndarray, y: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """Least-squares (a, b, c) of y = a u^2 + b u + c over the selected points, per row."""
    w = sel.astype("float64")
    u = np.where(sel, u, 0.0)
    y = np.where(sel, y, 0.0)
    s = [(w * u**p).sum(axis=1) for p in range(5)]
    t = [(w * u**p * y).sum(axis=1) for p in range(3)]
    m = np.stack([np.stack([s[4], s[3], s[2]], -1),
                  np.stack([s[3], s[2], s[1]], -1),
                  np.stack([s[2], s[1], s[0]], -1)], axis=1)
    rhs = np.stack([t[2], t[1], t[0]], axis=-1)
    coef = np.full(rhs.shape, np.nan)
    ok = sel.sum(axis=1) >= 3  # distinct LRs, so three points make the system regular
    if ok.any():
        coef[ok] = np.linalg.solve(m[ok], rhs[ok][..., None])[..., 0]
    return coef


def fit_optimum(log2_lr: np.ndarray, loss: np.ndarray, k: int = 5,
                window: float = 1.0) -> OptimumFit:
    """Optimal log2 LR of each row of `loss` (B, L) over ascending `log2_lr` (L,).

    NaN marks a point that does not count (diverged, or never run). The fit is a parabola in
    log2 LR through the k points nearest the argmin (and any others within `window` octaves
    of it); its vertex is used when it opens upward and lies within the span of the fitted
    points, else the argmin itself. Stricter than that rule alone: when all fitted points lie
    on one side of the argmin (it sits on the grid's edge) the argmin is used.
    """
    if k < 3:
        raise ValueError("the quadratic fit needs k >= 3 points")
    valid = np.isfinite(loss)
    has_any = valid.any(axis=1)
    argmin = np.where(has_any, np.argmin(np.where(valid, loss, np.inf), axis=1), -1)
    x0 = log2_lr[np.maximum(argmin, 0)]
    sel = _nearest_mask(log2_lr, x0, valid, k, window)
    u = log2_lr[None, :] - x0[:, None]
    a, b, c = _quadratic(u, loss, sel).T
    span_lo = np.where(sel, u, np.inf).min(axis=1)
    span_hi = np.where(sel, u, -np.inf).max(axis=1)
    # A one-sided fit (argmin at the edge of what trained, or beside a gap) cannot place a
    # minimum the data never bracketed: its vertex is not trusted even inside the span.
    two_sided = (span_lo < 0) & (span_hi > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        vertex = -b / (2 * a)
        inside = (a > 0) & two_sided & (vertex >= span_lo) & (vertex <= span_hi)
        vertex_loss = c - b * b / (4 * a)
    pred = a[:, None] * u**2 + b[:, None] * u + c[:, None]
    rss = np.where(sel, np.nan_to_num(loss) - pred, 0.0)
    rss = np.where(np.isfinite(a), (rss**2).sum(axis=1), np.nan)
    argmin_loss = np.take_along_axis(loss, np.maximum(argmin, 0)[:, None], axis=1)[:, 0]
    log2_opt = np.where(inside, x0 + vertex, x0)
    loss_opt = np.where(inside, vertex_loss, argmin_loss)
    log2_opt = np.where(has_any, log2_opt, np.nan)
    loss_opt = np.where(has_any, loss_opt, np.nan)
    return OptimumFit(log2_opt, loss_opt, argmin, inside & has_any, sel.sum(axis=1), rss)
