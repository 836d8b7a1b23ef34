"""A linear target's tables in its own units (analysis/choice.py).

The estimator fits every target in log2 of its `lr` role; a linear target (one with a value
<= 0) enters that role as 2^(value / step), so after the analysis its value columns map back
(log2(role) x step) and its per-octave columns (slopes, standard errors, octave gaps) scale by
the step: a drift is then the change of the optimum in the target's units per doubling. The
curvature (nats per grid step^2 in the fit) is divided by step^2: nats per unit^2.
"""

from __future__ import annotations

import pandas as pd

from mutransfer.analysis.choice import Choice

VALUE_COLUMNS = ("lr", "lr_opt", "ci_low", "ci_high", "lr_argmin", "largest_trained",
                 "smallest_any_diverged", "boundary", "largest_any_trained",
                 "smallest_all_diverged", "boundary_all", "smallest_unstable",
                 "lr_transferred", "lr_nearest", "lr_used", "best_lr")
OCTAVE_COLUMNS = ("slope", "intercept", "stderr", "ols_low", "ols_high", "ci_low", "ci_high",
                  "se", "se_seeds", "se_placement", "feasible_low", "feasible_high",
                  "scatter", "slope_all", "se_log2", "lr_gap_log2", "estimate", "log2_opt",
                  "log2_law", "residual", "miss", "max_abs_miss")


def to_units(df: pd.DataFrame, choice: Choice, kind: str) -> pd.DataFrame:
    """`df` with its target columns in the target's units; `kind` is `value` for tables of
    optima and cells (their ci_low/ci_high are values) or `octave` for slopes and laws."""
    if choice.log or df.empty:
        return df
    out = df.copy()
    cols = VALUE_COLUMNS if kind == "value" else OCTAVE_COLUMNS
    for col in cols:
        if col in out and pd.api.types.is_numeric_dtype(out[col]):
            values = out[col].to_numpy(float)
            out[col] = choice.from_role(values) if kind == "value" else values * choice.step
    if kind == "value" and "se_log2" in out:
        out["se_log2"] = out["se_log2"] * choice.step
    if kind == "value":
        # the other octave columns of a value table: per grid step in the role, so that the
        # one-LR shift compares with the interval beside it (it was 20x the interval's units
        # for a weight decay of step 0.05, yet not flagged)
        for col in ("lr_gap_log2", "one_lr_shift", "se_seeds_log2", "grid_step"):
            if col in out:
                out[col] = out[col] * choice.step
        # the fitted bowl's curvature, nats per grid step^2 in the fit: per unit^2 of the
        # target, a property of the loss curve that no longer changes with the grid's spacing
        # (a grid twice as fine quartered it)
        if "curvature" in out:
            out["curvature"] = out["curvature"] / choice.step**2
    return out
