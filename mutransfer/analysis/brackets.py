"""The slope of a boundary known only to a bracket at each width: log2 boundary = a + b log2 width.

A width's stability boundary lies somewhere between the largest LR that trained and the
smallest that diverged (a bracket, one grid step wide or more); its midpoint is not a
measurement with error zero. Three widths with one-octave brackets fit a line through their
midpoints exactly, so the OLS interval of the slope has zero width, yet the slope is known only
to about +-0.5. The interval here treats each boundary as the bracket it is:

- **Feasible slopes**: the slopes of the lines that pass through every bracket (closed form:
  every pair of widths bounds the slope). If the boundary follows a power law exactly, the true
  slope is always among them, whatever the grid.
- **Scatter**: the boundary need not follow a power law exactly. Model the midpoint of width i
  as m_i = a + b x_i + e_i + u_i, with e_i ~ N(0, s^2) the scatter about the line and u_i the
  boundary's unknown place inside its bracket, uniform on +-h_i (h_i half the bracket: the grid
  sits anywhere relative to the boundary), variance h_i^2 / 3. The least-squares slope of the
  midpoints has variance V = sum c_i^2 (s^2 + h_i^2/3) (c_i its weights); s^2 is estimated from
  the residuals by moments, E[RSS] = (n - 2) s^2 + sum (1 - leverage_i) h_i^2 / 3, floored at 0
  (with two widths it cannot be estimated and is taken as 0). The interval is
  slope -/+ q sqrt(V), q the t quantile at the Welch-Satterthwaite degrees of freedom of V (the
  bracket part is known, only the s^2 part is estimated from n - 2 df; q = 1.96 when s = 0).

The reported interval is the hull of the two: it contains every feasible slope (exact coverage
under a power law) and the scatter interval (when the brackets disagree with any single line,
there are no feasible slopes and it is the scatter interval alone). Three widths two octaves
apart with one-octave brackets give about +-0.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from mutransfer.analysis.tdist import t_quantile

LEVEL = 0.95
MAX_DF = 200  # above this many degrees of freedom the t quantile is taken as the normal one


@dataclass
class BracketSlope:
    """The slope of log2 boundary against log2 width from brackets, and its interval."""

    slope: float            # least squares through the bracket midpoints
    intercept: float
    ci_low: float           # hull of the feasible slopes and the scatter interval
    ci_high: float
    feasible_low: float     # slopes of lines through every bracket; NaN when there are none
    feasible_high: float
    scatter: float          # s: sd (log2) of the boundaries about the line beyond the brackets
    df: float               # Satterthwaite df of the scatter interval (inf when s = 0)
    note: str = ""


def feasible_slopes(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """(lowest, highest) slope of a line a + b x passing through every [lo_i, hi_i] at x_i;
    (NaN, NaN) when no line does. Distinct x required."""
    low, high = -math.inf, math.inf
    for i in range(len(x)):
        for j in range(len(x)):
            if x[i] > x[j]:
                dx = x[i] - x[j]
                low = max(low, (lo[i] - hi[j]) / dx)
                high = min(high, (hi[i] - lo[j]) / dx)
    if low > high:
        return math.nan, math.nan
    return float(low), float(high)


def _quantile(level: float, df: float) -> float:
    if not math.isfinite(df) or df > MAX_DF:
        return NormalDist().inv_cdf(0.5 + level / 2)
    return t_quantile(level, max(1, int(math.floor(df))))  # floor: the conservative side


def bracket_slope(x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  level: float = LEVEL) -> BracketSlope:
    """The slope of the boundary against `x` (log2 widths, at least two distinct) from its
    brackets [lo, hi] (log2 LRs; an inverted pair is taken as [min, max])."""
    x = np.asarray(x, float)
    lo, hi = np.minimum(lo, hi).astype(float), np.maximum(lo, hi).astype(float)
    n = len(x)
    m, h2 = (lo + hi) / 2, ((hi - lo) / 2) ** 2
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    c = xc / sxx
    slope = float((c * m).sum())
    intercept = float(m.mean() - slope * x.mean())
    known = float((c**2 * h2 / 3).sum())
    s2, df, note = 0.0, math.inf, ""
    if n > 2:
        rss = float(((m - intercept - slope * x) ** 2).sum())
        leverage = 1 / n + xc**2 / sxx
        s2 = max(0.0, (rss - float(((1 - leverage) * h2 / 3).sum())) / (n - 2))
        if s2 > 0:
            df = (known + s2 / sxx) ** 2 / ((s2 / sxx) ** 2 / (n - 2))
    else:
        note = "two widths: the scatter about a power law is not estimated"
    half = _quantile(level, df) * math.sqrt(known + s2 / sxx)
    f_lo, f_hi = feasible_slopes(x, lo, hi)
    ci_low, ci_high = slope - half, slope + half
    if math.isfinite(f_lo):
        ci_low, ci_high = min(ci_low, f_lo), max(ci_high, f_hi)
    else:
        note = "; ".join(filter(None, [note, "no line passes through every bracket"]))
    return BracketSlope(slope, intercept, ci_low, ci_high, f_lo, f_hi, math.sqrt(s2), df, note)
