"""Least-squares slopes in log-log coordinates, single and row-wise (for bootstrap resamples)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mutransfer.analysis.tdist import t_quantile


@dataclass
class Line:
    slope: float
    intercept: float
    stderr: float   # OLS standard error of the slope; NaN with fewer than three points


def ols(x: np.ndarray, y: np.ndarray) -> Line:
    """Ordinary least squares y = slope * x + intercept over the finite pairs."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = np.asarray(x, float)[keep], np.asarray(y, float)[keep]
    if len(x) < 2 or np.ptp(x) == 0:
        return Line(np.nan, np.nan, np.nan)
    xm, ym = x.mean(), y.mean()
    sxx = ((x - xm) ** 2).sum()
    slope = ((x - xm) * (y - ym)).sum() / sxx
    intercept = ym - slope * xm
    stderr = np.nan
    if len(x) > 2:
        resid = y - (slope * x + intercept)
        stderr = float(np.sqrt((resid**2).sum() / (len(x) - 2) / sxx))
    return Line(float(slope), float(intercept), stderr)


def rowwise_slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS slope of each row of y (B, W) against x (W,); NaN for rows with a missing value."""
    complete = np.isfinite(y).all(axis=1)
    xc = x - x.mean()
    sxx = (xc**2).sum()
    slopes = np.full(y.shape[0], np.nan)
    if sxx > 0:
        slopes[complete] = (y[complete] - y[complete].mean(axis=1, keepdims=True)) @ xc / sxx
    return slopes


def t_interval(line: Line, n_points: int, level: float = 0.95) -> tuple[float, float, int]:
    """(low, high, df) of the slope: slope -/+ t(level, df) x stderr with df = n_points - 2;
    NaNs below three points. With df 1 the t quantile is 12.7, not 1.96: a slope from three
    widths is known to within a dozen standard errors only."""
    df = n_points - 2
    if df < 1 or not np.isfinite(line.stderr):
        return np.nan, np.nan, max(df, 0)
    half = t_quantile(level, df) * line.stderr
    return line.slope - half, line.slope + half, df
