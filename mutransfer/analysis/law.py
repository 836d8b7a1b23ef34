"""One law across the scale axes: log2 optimum = a + sum_i b_i log2(scale_i), per family.

Fitted by weighted least squares over the optima with an interval (weights 1/s.e.^2, the
s.e. of each log2 optimum from intervals.py; an optimum without one is left out and the note
says so). When the optima scatter about the law more than
their intervals allow (Birge ratio chi^2 / (n - p) > 1) the covariance is inflated by it and
the intervals use t with n - p degrees of freedom; otherwise t with the noise's df (`ci_df`).
Without any interval (no noise estimate), ordinary least squares with t(n - p). Optima on the
grid's edge (bounds) and without a fitted optimum are left out.

Held-out check, per scale axis: refit without the points at that axis's largest value and
predict them; the miss is measured - predicted log2 optimum (octaves), averaged over the held
points, with the interval from both the held points' s.e. (inflated by the refit's Birge
ratio where it exceeds 1, as the refit's covariance is: a held point scatters as the fitted
ones do) and the refit's covariance. Row
`all`: refit without every point at the largest value of any axis and predict the corner (every
axis at its largest): the extrapolation to a model larger than any in the fit. Fewer points
than parameters (or an axis with one value left): a `no fit` row, never a crash.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mutransfer.analysis.groups import as_key
from mutransfer.analysis.intervals import LEVEL
from mutransfer.analysis.tdist import t_quantile

ALL = "all"


@dataclass
class LawFit:
    beta: np.ndarray      # (P,) intercept, then one exponent per scale axis
    cov: np.ndarray       # (P, P) its covariance, inflated where the Birge ratio exceeds 1
    df: int               # degrees of freedom of the t quantile
    birge: float          # chi^2 / (n - p); NaN without residual df or weights
    method: str           # wls | ols
    n: int

    @property
    def inflation(self) -> float:
        """The factor on the points' variances beyond their s.e.: the Birge ratio where it
        exceeds 1 (the covariance is inflated by it), else 1."""
        return self.birge if np.isfinite(self.birge) and self.birge > 1 else 1.0

    @property
    def t(self) -> float:
        return t_quantile(LEVEL, self.df) if self.df >= 1 else math.nan

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log2 optimum, its variance) at design rows `x` (N, P)."""
        return x @ self.beta, np.einsum("np,pq,nq->n", x, self.cov, x)


def design(scales: np.ndarray) -> np.ndarray:
    """[1, log2 scale_1, ...] per row of `scales` (N, K)."""
    return np.hstack([np.ones((len(scales), 1)), np.log2(scales.astype(float))])


def no_fit_reason(scales: np.ndarray, names: list[str]) -> str:
    """Why these points cannot carry a law, or ''."""
    n, k = scales.shape
    if n < k + 1:
        return f"no fit: {n} point{'' if n == 1 else 's'} for {k + 1} parameters"
    flat = [j for j in range(k) if np.ptp(scales[:, j]) == 0]
    if flat:
        return f"no fit: {names[flat[0]]} takes one value among these points"
    return ""


def fit_law(scales: np.ndarray, y: np.ndarray, se: np.ndarray, noise_df: int) -> LawFit:
    """WLS (OLS when any s.e. is missing) of y on log2 scales; see the module docstring."""
    x = design(scales)
    n, p = x.shape
    weighted = bool(np.isfinite(se).all() and (se > 0).all())
    w = 1.0 / se**2 if weighted else np.ones(n)
    xtwx = x.T @ (w[:, None] * x)
    cov = np.linalg.pinv(xtwx)
    beta = cov @ (x.T @ (w * y))
    resid = y - x @ beta
    dof = n - p
    chi2 = float((w * resid**2).sum())
    birge = chi2 / dof if dof > 0 else math.nan
    if not weighted:
        cov = cov * birge if dof > 0 else np.full_like(cov, np.nan)
        return LawFit(beta, cov, dof, birge, "ols", n)
    if np.isfinite(birge) and birge > 1:
        return LawFit(beta, cov * birge, dof, birge, "wls", n)
    return LawFit(beta, cov, noise_df, birge, "wls", n)


@dataclass
class FamilyPoints:
    key: tuple
    scales: np.ndarray    # (N, K)
    y: np.ndarray         # log2 optimum
    se: np.ndarray
    noise_df: int
    n_left_out: int       # edge or no optimum


def family_points(rows: pd.DataFrame, key: tuple, scale_cols: list[str]) -> FamilyPoints:
    """The optima that enter the law: not on the edge, and with an interval where any optimum
    of the family has one (weights need it); without any, every located optimum (OLS)."""
    ok = np.isfinite(rows["lr_opt"].to_numpy(float)) & ~rows["edge"].to_numpy(bool)
    has_se = np.isfinite(rows["se_log2"].to_numpy(float)) & (rows["se_log2"].to_numpy(float) > 0)
    if (ok & has_se).any():
        ok &= has_se
    r = rows[ok]
    df = r["ci_df"].to_numpy(int)
    return FamilyPoints(key, r[scale_cols].to_numpy(float), np.log2(r["lr_opt"].to_numpy(float)),
                        r["se_log2"].to_numpy(float), int(df.min()) if len(df) else 0,
                        int((~ok).sum()))


def _coef_rows(fp: FamilyPoints, fit: LawFit | None, cols: list[str], names: list[str],
               note: str) -> list[dict]:
    base = {**dict(zip(cols, fp.key)), "n_points": len(fp.y)}
    rows = []
    for j, term in enumerate(["intercept", *names]):
        row = {**base, "term": term, "estimate": np.nan, "se": np.nan, "ci_low": np.nan,
               "ci_high": np.nan, "df": 0, "birge_ratio": np.nan, "method": "", "note": note}
        if fit is not None:
            se = float(np.sqrt(fit.cov[j, j]))
            half = fit.t * se
            row.update(estimate=float(fit.beta[j]), se=se, ci_low=fit.beta[j] - half,
                       ci_high=fit.beta[j] + half, df=fit.df, birge_ratio=fit.birge,
                       method=fit.method)
        rows.append(row)
    return rows


def _holdout_row(fp: FamilyPoints, held: np.ndarray, target: np.ndarray, label: str,
                 cols: list[str], names: list[str]) -> dict:
    """Refit without `held` points, predict the `target` points (a subset of `held`)."""
    row = {**dict(zip(cols, fp.key)), "held_out": label, "n_fit": int((~held).sum()),
           "n_held": int(target.sum()), "miss": np.nan, "se": np.nan, "ci_low": np.nan,
           "ci_high": np.nan, "df": 0, "max_abs_miss": np.nan, "note": ""}
    reason = no_fit_reason(fp.scales[~held], names)
    if reason:
        row["note"] = reason
        return row
    fit = fit_law(fp.scales[~held], fp.y[~held], fp.se[~held], fp.noise_df)
    pred, _ = fit.predict(design(fp.scales[target]))
    miss = fp.y[target] - pred
    # the held points' own noise (independent of the refit) and the refit's, at their mean;
    # a held point scatters about the law as the fitted ones do: by its s.e. times the Birge
    # ratio's root where the fit's covariance is inflated by it (before, only the refit's part
    # carried the scatter beyond the intervals, and the held-out interval undercovered: 0.92
    # for a law whose optima scatter 3x their s.e.), by the residual scatter under OLS
    xbar = design(fp.scales[target]).mean(axis=0)
    se_meas = (fp.se[target] * math.sqrt(fit.inflation) if fit.method == "wls"
               else np.full(len(miss), math.sqrt(fit.birge) if fit.n > len(fit.beta) else 0.0))
    var_mean = float(xbar @ fit.cov @ xbar + (se_meas**2).sum() / len(miss) ** 2)
    se = math.sqrt(var_mean) if var_mean >= 0 else math.nan
    half = fit.t * se
    row.update(miss=float(miss.mean()), se=se, ci_low=float(miss.mean()) - half,
               ci_high=float(miss.mean()) + half, df=fit.df,
               max_abs_miss=float(np.abs(miss).max()))
    if not np.isfinite(half):
        row["note"] = "no interval: the refit has no residual df and no s.e."
    return row


def holdout_rows(fp: FamilyPoints, cols: list[str], names: list[str]) -> list[dict]:
    rows = []
    if not len(fp.y):
        return rows
    at_max = np.column_stack([fp.scales[:, j] == fp.scales[:, j].max()
                              for j in range(fp.scales.shape[1])])
    for j, name in enumerate(names):
        rows.append(_holdout_row(fp, at_max[:, j], at_max[:, j], f"largest {name}", cols,
                                 names))
    any_max, corner = at_max.any(axis=1), at_max.all(axis=1)
    if corner.any():
        rows.append(_holdout_row(fp, any_max, corner, ALL, cols, names))
    return rows


def point_rows(fp: FamilyPoints, fit: LawFit | None, cols: list[str],
               names: list[str]) -> list[dict]:
    pred = fit.predict(design(fp.scales))[0] if fit is not None else np.full(len(fp.y), np.nan)
    return [{**dict(zip(cols, fp.key)), **dict(zip(names, (int(v) for v in s))),
             "log2_opt": y, "se_log2": se, "log2_law": p, "residual": y - p,
             "residual_se": (y - p) / se if se > 0 else np.nan}
            for s, y, se, p in zip(fp.scales, fp.y, fp.se, pred)]


@dataclass
class Law:
    coef: pd.DataFrame      # per family and term: estimate with its interval
    points: pd.DataFrame    # per optimum: measured, the law's prediction, residual
    holdout: pd.DataFrame   # per family and held-out axis: the miss in octaves


def law_tables(lr_opt: pd.DataFrame, pool_cols: list[str], scale_cols: list[str],
               names: list[str]) -> Law:
    """The law per family (`pool_cols`) over the scale columns (`names`: how the tables name
    them). Empty tables with fewer than two scale axes."""
    if len(scale_cols) < 2 or lr_opt.empty:
        return Law(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    coef, points, hold = [], [], []
    for k, rows in lr_opt.groupby(pool_cols, sort=True, dropna=False):
        fp = family_points(rows, as_key(k), scale_cols)
        reason = no_fit_reason(fp.scales, names)
        fit = None if reason else fit_law(fp.scales, fp.y, fp.se, fp.noise_df)
        if fp.n_left_out and not reason:
            reason = (f"{fp.n_left_out} optima left out (on the grid edge, none, or no "
                      "interval: see the optimum table)")
        coef += _coef_rows(fp, fit, pool_cols, names, reason)
        points += point_rows(fp, fit, pool_cols, names)
        hold += holdout_rows(fp, pool_cols, names)
    return Law(pd.DataFrame(coef), pd.DataFrame(points), pd.DataFrame(hold))
