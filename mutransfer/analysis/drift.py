"""Drift of the optimal LR with width: the slope of log2 lr* against log2 width per family.

The interval propagates each width's lr* uncertainty: draw b of every width (the noise draws
of optimum.py, independent across widths) gives one slope, and the 2.5/97.5 percentiles of
those slopes are the interval. It measures how well the lr* are known, not how well a power law
describes them; the OLS interval beside it (slope -/+ t x s.e., with its degrees of freedom,
widths - 2) measures the scatter of the lr* about the line. The seed bootstrap's slope
interval is added where every width has one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mutransfer.analysis.groups import as_key
from mutransfer.analysis.intervals import expanded_percentiles, percentile_interval
from mutransfer.analysis.optimum import CI_PERCENTILES, GroupOptimum
from mutransfer.analysis.slopes import Line, ols, rowwise_slopes, t_interval

NEEDS_TWO = "needs at least two widths"


def widths_text(widths: np.ndarray) -> str:
    return ",".join(str(int(w)) for w in widths)


def draw_interval(draws: list[np.ndarray], x: np.ndarray,
                  percentiles: tuple[float, float] = CI_PERCENTILES) -> tuple[float, float, int]:
    """Percentile interval of the slopes through draw b of every width; NaN if a width has
    no draws."""
    n = min(len(d) for d in draws)
    if n == 0:
        return np.nan, np.nan, 0
    slopes = rowwise_slopes(x, np.stack([d[:n] for d in draws], axis=1))
    lo, hi = percentile_interval(slopes, percentiles)
    return lo, hi, int(np.isfinite(slopes).sum())


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


def ols_columns(fit: WidthFit) -> dict:
    """slope, intercept, OLS s.e. and its t interval with the degrees of freedom."""
    line = fit.line
    if line is None:
        return {"slope": np.nan, "intercept": np.nan, "stderr": np.nan, "df": 0,
                "ols_low": np.nan, "ols_high": np.nan}
    lo, hi, df = t_interval(line, len(fit.widths))
    return {"slope": line.slope, "intercept": line.intercept, "stderr": line.stderr, "df": df,
            "ols_low": lo, "ols_high": hi}


def _sources(optima: list[GroupOptimum]) -> str:
    """Where the widths' noise came from: 'pooled', 'fit', or both joined by '+'."""
    return "+".join(sorted({g.noise.source for g in optima}))


def drift_row(fam_key: tuple, fam: pd.DataFrame, cols: list[str],
              by_key: dict[tuple, GroupOptimum]) -> dict:
    fit = width_fit(fam, "lr_opt", "an optimum (some LR trained)")
    widths = fit.widths
    row = {**dict(zip(cols, fam_key)), "n_widths": len(widths), "widths": widths_text(widths),
           **ols_columns(fit), "ci_low": np.nan, "ci_high": np.nan, "ci_method": "",
           "n_draws": 0, "boot_low": np.nan, "boot_high": np.nan, "n_boot": 0,
           "n_edge": int(fit.rows["edge"].sum()), "note": fit.note}
    if fit.line is None:
        return row
    optima = [by_key[(*fam_key, w)] for w in widths]
    lo, hi, n = draw_interval([g.draws_log2 for g in optima], fit.x)
    b_lo, b_hi, n_b = draw_interval([g.boot_log2 for g in optima], fit.x,
                                    expanded_percentiles(min(g.n_seeds for g in optima)))
    row.update(ci_low=lo, ci_high=hi, n_draws=n, ci_method=_sources(optima) if n else "",
               boot_low=b_lo, boot_high=b_hi, n_boot=n_b)
    notes = []
    if row["n_edge"]:
        notes.append(f"{row['n_edge']} of {len(widths)} optima on the grid edge: slope is a "
                     "bound, no interval")
    elif n == 0:
        missing = [str(int(w)) for w, g in zip(widths, optima) if not len(g.draws_log2)]
        notes.append(f"no interval: lr* at width {','.join(missing)} has none")
    row["note"] = "; ".join(notes)
    return row


def drift_table(lr_opt: pd.DataFrame, optima: list[GroupOptimum],
                family_cols: list[str]) -> pd.DataFrame:
    by_key = {g.key: g for g in optima}
    rows = [drift_row(as_key(k), fam, family_cols, by_key)
            for k, fam in lr_opt.groupby(family_cols, sort=True, dropna=False)]
    return pd.DataFrame(rows)
