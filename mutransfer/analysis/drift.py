"""Drift of the optimal LR with width: the slope of log2 lr* against log2 width per family.

The interval propagates the seed bootstrap: resample b of every width gives one slope, and the
2.5/97.5 percentiles of those slopes are the interval (widths are resampled independently).
The OLS standard error of the slope is reported beside it for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mutransfer.analysis.groups import as_key
from mutransfer.analysis.optimum import CI_PERCENTILES, GroupOptimum
from mutransfer.analysis.slopes import Line, ols, rowwise_slopes

NEEDS_TWO = "needs at least two widths"


def widths_text(widths: np.ndarray) -> str:
    return ",".join(str(int(w)) for w in widths)


def _boot_interval(boots: list[np.ndarray], x: np.ndarray) -> tuple[float, float, int]:
    """Percentile interval of the slopes of the resamples; NaN if a width has no resamples."""
    if any(len(b) == 0 for b in boots):
        return np.nan, np.nan, 0
    slopes = rowwise_slopes(x, np.stack(boots, axis=1))
    slopes = slopes[np.isfinite(slopes)]
    if len(slopes) == 0:
        return np.nan, np.nan, 0
    lo, hi = np.percentile(slopes, CI_PERCENTILES)
    return float(lo), float(hi), len(slopes)


def too_few(n_found: int, n_widths: int, what: str) -> str:
    """Why there is no slope: one width in the sweep, or too few widths with a value."""
    if n_widths < 2:
        return NEEDS_TWO
    return f"{NEEDS_TWO}; {what} at {n_found} of {n_widths}"


@dataclass
class WidthFit:
    """One family's rows with a finite value, by width, and the line of log2 value against
    log2 width; no line (and a note saying why) with fewer than two such widths."""

    rows: pd.DataFrame
    widths: np.ndarray
    x: np.ndarray           # log2 widths
    line: Line | None
    note: str


def width_fit(fam: pd.DataFrame, col: str, what: str) -> WidthFit:
    """Fit log2 `col` against log2 width over the widths where it is finite; `what` names the
    value in the note when too few widths have one."""
    n_all = fam["width"].nunique()
    fam = fam[np.isfinite(fam[col])].sort_values("width")
    widths = fam["width"].to_numpy()
    x = np.log2(widths.astype(float))
    if len(widths) < 2:
        return WidthFit(fam, widths, x, None, too_few(len(widths), n_all, what))
    return WidthFit(fam, widths, x, ols(x, np.log2(fam[col].to_numpy())), "")


def drift_row(fam_key: tuple, fam: pd.DataFrame, cols: list[str],
              by_key: dict[tuple, GroupOptimum]) -> dict:
    fit = width_fit(fam, "lr_opt", "an optimum (some LR trained)")
    widths, line = fit.widths, fit.line
    row = {**dict(zip(cols, fam_key)), "n_widths": len(widths), "widths": widths_text(widths),
           "slope": np.nan, "ci_low": np.nan, "ci_high": np.nan, "stderr": np.nan,
           "intercept": np.nan, "n_boot": 0, "n_edge": int(fit.rows["edge"].sum()),
           "note": fit.note}
    if line is None:
        return row
    boots = [by_key[(*fam_key, w)].boot_log2 for w in widths]
    lo, hi, n = _boot_interval(boots, fit.x)
    row.update(slope=line.slope, intercept=line.intercept, stderr=line.stderr,
               ci_low=lo, ci_high=hi, n_boot=n)
    notes = []
    if row["n_edge"]:
        notes.append(f"{row['n_edge']} of {len(widths)} optima on the grid edge: slope is a bound")
    if n == 0:
        notes.append("no bootstrap interval (a width has a single seed)")
    row["note"] = "; ".join(notes)
    return row


def drift_table(lr_opt: pd.DataFrame, optima: list[GroupOptimum],
                family_cols: list[str]) -> pd.DataFrame:
    by_key = {g.key: g for g in optima}
    rows = [drift_row(as_key(k), fam, family_cols, by_key)
            for k, fam in lr_opt.groupby(family_cols, sort=True, dropna=False)]
    return pd.DataFrame(rows)
