"""Drift of the optimal LR with width: the slope of log2 lr* against log2 width per family.

The slope is a weighted sum of the widths' log2 lr* (least squares: sum c_w log2 lr*_w), so
its standard error is sqrt(sum c_w^2 se_w^2 + placement^2): se_w is each width's standard error
from the data (intervals.Noise.seed_stderr: the seeds' noise pooled over the family, and the
LRs' own effects), and `placement` is the slope's own grid-placement term. Each lr* carries a
placement term (intervals.GRID_SD) for where the grid sits relative to its optimum; counted
once per width it would dominate the slope's s.e. (at the 0.2 octave it was when this was
measured, it alone kept a 4-width interval wider than ±0.17), yet what moving the grid does
to the slope is measured, and smaller (PLACEMENT_SD): the widths share the grid, and their
placement errors partly move together. The 95% interval is slope -/+ t x s.e. with the
pooled noise's degrees of freedom. It measures how well the lr* are known, not how well a power
law describes them; the OLS interval beside it (slope -/+ t x s.e., with its degrees of
freedom, widths - 2) measures the scatter of the lr* about the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mutransfer.analysis.groups import as_key
from mutransfer.analysis.intervals import LEVEL
from mutransfer.analysis.optimum import GroupOptimum
from mutransfer.analysis.slopes import Line, ols, t_interval
from mutransfer.analysis.tdist import t_quantile

NEEDS_TWO = "needs at least two widths"
# The slope's grid-placement term, as the sd of an independent error of each width's lr*
# (octaves; the slope's is PLACEMENT_SD x sqrt(sum c_w^2)), per octave of grid step above one.
# Measured on the dense store B (benchmarks/check_interval.py placement: mup_ssm and sp,
# widths 32-128, quarter-octave LRs, 8 seeds): over its 11 half- and one-octave sub-grids with
# every seed, each width's lr* moved from the dense grid's by 0.079 octave rms (half 0.065,
# one octave 0.086) and the slope by 0.044 octave per doubling rms (half 0.045, one octave
# 0.044: no smaller on the finer grid; mup_ssm 0.056, sp 0.031), i.e. 0.063 per width for
# three widths, where the widths' own placement terms (GRID_SD as it was then, 0.2 per
# octave of step) gave 0.14 (one octave) and 0.07 (half). From 11 sub-grids: its own 95%
# upper bound is about 1.7x.
PLACEMENT_SD = 0.063
PLACEMENT_STEP = 1.0  # octaves: at most this step, the measured term; coarser, in proportion


def widths_text(widths: np.ndarray) -> str:
    return ",".join(str(int(w)) for w in widths)


def slope_stderr(x: np.ndarray, stderr: np.ndarray) -> float:
    """Standard error of the least-squares slope through points at `x` whose values have
    independent standard errors `stderr`."""
    xc = x - x.mean()
    c = xc / (xc**2).sum()
    return float(np.sqrt((c**2 * stderr**2).sum()))


def placement_stderr(x: np.ndarray, step: float) -> float:
    """The slope's grid-placement term for widths at log2 `x` on a grid of `step` octaves
    (the median step inside the widths' fit windows; PLACEMENT_SD)."""
    scale = max(step, PLACEMENT_STEP) / PLACEMENT_STEP if np.isfinite(step) else 1.0
    return slope_stderr(x, np.full(len(x), PLACEMENT_SD * scale))


def interval_columns(fit: WidthFit, seed_se: np.ndarray, steps: np.ndarray,
                     t: float) -> dict:
    """The slope's 95% interval, slope -/+ t x s.e., and the s.e.'s two parts: from the data
    (each point's seed part, independent) and from the grid's placement (once for the slope,
    at the coarsest finite step)."""
    finite = steps[np.isfinite(steps)]
    seeds = slope_stderr(fit.x, seed_se)
    place = placement_stderr(fit.x, float(finite.max()) if len(finite) else math.nan)
    se = math.hypot(seeds, place)
    return {"ci_low": fit.line.slope - t * se, "ci_high": fit.line.slope + t * se, "se": se,
            "se_seeds": seeds, "se_placement": place}


def plural(label: str = "width") -> str:
    """How the notes name several points of the scale axis `label`: `widths`, or `values of
    model.n_layer` when another axis has the width role."""
    return "widths" if label == "width" else f"values of {label}"


def too_few(n_found: int, n_widths: int, what: str, label: str = "width") -> str:
    """Why there is no slope: one width in the sweep, or too few widths with a value (`label`:
    the scale axis's name when it is not the width)."""
    needs = f"needs at least two {plural(label)}"
    if n_widths < 2:
        return needs
    return f"{needs}; {what} at {n_found} of {n_widths}"


@dataclass
class WidthFit:
    """One family's rows with a finite value, by width, and the line of log2 value against
    log2 width; no line (and a note saying why) with fewer than two such widths."""

    rows: pd.DataFrame
    widths: np.ndarray
    x: np.ndarray           # log2 widths
    line: Line | None
    note: str


def width_fit(fam: pd.DataFrame, col: str, what: str, scale_col: str = "width",
              label: str = "width") -> WidthFit:
    """Fit log2 `col` against log2 width (or another scale axis's column) over the widths
    where it is finite; `what` names the value in the note when too few widths have one,
    `label` the axis."""
    n_all = fam[scale_col].nunique()
    fam = fam[np.isfinite(fam[col])].sort_values(scale_col)
    widths = fam[scale_col].to_numpy()
    x = np.log2(widths.astype(float))
    if len(widths) < 2:
        return WidthFit(fam, widths, x, None, too_few(len(widths), n_all, what, label))
    return WidthFit(fam, widths, x, ols(x, np.log2(fam[col].to_numpy())), "")


def edge_bound(fit: WidthFit) -> str:
    """How the optima on the grid's edge bound the slope, which is a weighted sum of the
    widths' log2 optima with weights c (negative below the mean log2 width, positive above):
    an optimum on the high edge is at least the value shown, one on the low edge at most.
    'lower' when every edge optimum can only raise the true slope above the one shown,
    'upper' when each can only lower it, 'none' when they pull both ways or one rests on a
    single trained LR ('only': no side known), 'unaffected' when every edge optimum has
    weight 0 (the middle of three evenly spaced widths); '' without edge optima."""
    side = fit.rows["edge_side"].astype(str).to_numpy() if "edge_side" in fit.rows else \
        np.where(fit.rows["edge"].to_numpy(bool), "only", "")
    if not (side != "").any():
        return ""
    xc = fit.x - fit.x.mean()
    weighs = (side != "") & (np.abs(xc) > 1e-12)
    if not weighs.any():
        return "unaffected"
    sign = np.select([side == "high", side == "low", side == "only"], [1.0, -1.0, np.nan], 0.0)
    pull = (sign * np.sign(xc))[weighs]
    if np.isnan(pull).any():
        return "none"
    if (pull > 0).all():
        return "lower"
    if (pull < 0).all():
        return "upper"
    return "none"


# how a plot's legend qualifies a drift whose optima lie on the grid's edge (edge_bound)
BOUND_WORDS = {"lower": " (a lower bound)", "upper": " (an upper bound)",
               "none": " (not a bound)", "unaffected": ""}


def edge_note(n_edge: int, n: int, bound: str) -> str:
    """The drift's note when optima lie on the grid's edge: which bound the slope is."""
    head = f"{n_edge} of {n} optima on the grid edge: "
    if bound == "lower":
        return head + "slope is a lower bound (the drift is at least the slope), no interval"
    if bound == "upper":
        return head + "slope is an upper bound (the drift is at most the slope), no interval"
    if bound == "unaffected":
        return head + "the slope gives them weight 0, no interval"
    return head + ("slope is not even a bound (the edge optima pull it both ways, or one rests "
                   "on a single trained LR), no interval")


def ols_columns(fit: WidthFit) -> dict:
    """slope, intercept, OLS s.e. and its t interval with the degrees of freedom."""
    line = fit.line
    if line is None:
        return {"slope": np.nan, "intercept": np.nan, "stderr": np.nan, "df": 0,
                "ols_low": np.nan, "ols_high": np.nan}
    lo, hi, df = t_interval(line, len(fit.widths))
    return {"slope": line.slope, "intercept": line.intercept, "stderr": line.stderr, "df": df,
            "ols_low": lo, "ols_high": hi}


def drift_row(fam_key: tuple, fam: pd.DataFrame, cols: list[str],
              by_key: dict[tuple, GroupOptimum], label: str = "width") -> dict:
    fit = width_fit(fam, "lr_opt", "an optimum (some LR trained)", label=label)
    widths = fit.widths
    row = {**dict(zip(cols, fam_key)), "n_widths": len(widths), "widths": widths_text(widths),
           **ols_columns(fit), "ci_low": np.nan, "ci_high": np.nan, "se": np.nan,
           "se_seeds": np.nan, "se_placement": np.nan, "ci_method": "", "ci_df": 0,
           "n_edge": int(fit.rows["edge"].sum()), "edge_bound": "", "note": fit.note}
    if fit.line is None:
        return row
    optima = [by_key[(*fam_key, w)] for w in widths]
    stderr = np.array([g.noise.seed_stderr(g.spread) for g in optima])
    notes = []
    if row["n_edge"]:
        row["edge_bound"] = edge_bound(fit)
        notes.append(edge_note(row["n_edge"], len(widths), row["edge_bound"]))
    elif not np.isfinite(stderr).all():
        missing = [str(int(w)) for w, e in zip(widths, stderr) if not np.isfinite(e)]
        notes.append(f"no interval: lr* at {label} {','.join(missing)} has none")
    else:
        noise = optima[0].noise  # one per family
        row.update(interval_columns(fit, stderr, np.array([g.spread.step for g in optima]),
                                    noise.t), ci_method=noise.source, ci_df=noise.df)
    row["note"] = "; ".join(notes)
    return row


def drift_table(lr_opt: pd.DataFrame, optima: list[GroupOptimum],
                family_cols: list[str], label: str = "width") -> pd.DataFrame:
    """Per family: the drift of log2 lr* per doubling of width (`label`: the name of the
    axis in the width role, for the notes)."""
    by_key = {g.key: g for g in optima}
    rows = [drift_row(as_key(k), fam, family_cols, by_key, label)
            for k, fam in lr_opt.groupby(family_cols, sort=True, dropna=False)]
    return pd.DataFrame(rows)


def scale_drift_row(key: tuple, fam: pd.DataFrame, cols: list[str], scale_col: str,
                    label: str | None = None) -> dict:
    """The drift of log2 optimum per doubling of `scale_col` in one family (every other
    group column fixed), its interval as drift_row's: the optima's seed parts
    (`se_seeds_log2`, one pooled noise per family: its df in `ci_df`) and the grid's
    placement once for the slope."""
    label = label or scale_col  # the axis's name; scale_col is its internal column
    fit = width_fit(fam, "lr_opt", "an optimum", scale_col, label)
    row = {**dict(zip(cols, key)), "scale": scale_col, "n_points": len(fit.widths),
           "points": widths_text(fit.widths), **ols_columns(fit), "ci_low": np.nan,
           "ci_high": np.nan, "se": np.nan, "se_seeds": np.nan, "se_placement": np.nan,
           "ci_method": "", "ci_df": 0,
           "n_edge": int(fit.rows["edge"].sum()), "edge_bound": "",
           "note": fit.note}
    if fit.line is None:
        return row
    stderr = fit.rows["se_seeds_log2"].to_numpy(float)
    if row["n_edge"]:
        row["edge_bound"] = edge_bound(fit)
        row["note"] = edge_note(row["n_edge"], len(fit.widths), row["edge_bound"])
    elif not np.isfinite(stderr).all():
        missing = [str(int(w)) for w, e in zip(fit.widths, stderr) if not np.isfinite(e)]
        row["note"] = f"no interval: the optimum at {label} {','.join(missing)} has none"
    else:
        df = int(fit.rows["ci_df"].min())
        row.update(interval_columns(fit, stderr, fit.rows["grid_step"].to_numpy(float),
                                    t_quantile(LEVEL, df)),
                   ci_method=str(fit.rows["ci_method"].iloc[0]), ci_df=df, note="")
    return row


def scale_drift_table(lr_opt: pd.DataFrame, group_cols: list[str],
                      scale_cols: list[str], names: dict[str, str] | None = None
                      ) -> pd.DataFrame:
    """Per scale axis and family (the other group columns): the drift of log2 optimum per
    doubling of that axis, as drift_table computes it for width; `names`: each internal
    scale column's name, for the notes. The scale axes' columns are Int64."""
    rows = []
    for scale_col in scale_cols:
        cols = [c for c in group_cols if c != scale_col]
        label = (names or {}).get(scale_col, scale_col)
        rows += [scale_drift_row(as_key(k), fam, cols, scale_col, label)
                 for k, fam in lr_opt.groupby(cols, sort=True, dropna=False)]
    out = pd.DataFrame(rows)
    # the scale axes' columns hold whole numbers, null on the rows of the axis itself: nullable
    # Int64, as in every other table (a plain frame made them float64: 64.0)
    for col in scale_cols:
        out[col] = pd.array(out[col] if col in out else [pd.NA] * len(out), dtype="Int64")
    return out
