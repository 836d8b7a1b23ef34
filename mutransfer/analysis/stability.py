"""Stability boundary per group, and its slope against width per family.

Two boundaries, because a surviving seed must not hide a failed one and yet one unlucky seed
should not be all the table says:
  onset  between the largest LR where every seed trained and the smallest LR where any seed
         diverged: above it, training is no longer reliable. This is the boundary.
  all    between the largest LR where some seed trained and the smallest LR where every seed
         diverged: above it, nothing trains.
Each point estimate is the geometric mean of its two ends. A bracket is `clean` when no LR
below its upper end is on the wrong side (e.g. a seed diverged below an LR where all trained);
otherwise both ends are still reported and the boundary is ambiguous. LRs not run at a width
are neither trained nor diverged: the bracket simply spans them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.cells import DIVERGED, NOT_RUN, PARTIAL, TRAINED
from mutransfer.analysis.drift import ols_columns, width_fit, widths_text
from mutransfer.analysis.groups import as_key


def _bracket(below: pd.Series, above: pd.Series) -> tuple[float, float, float, bool]:
    """(largest of `below`, smallest of `above`, their geometric mean, clean)."""
    hi_ok = float(below.max()) if len(below) else np.nan
    lo_bad = float(above.min()) if len(above) else np.nan
    clean = not (len(below) and len(above) and lo_bad < hi_ok)
    return hi_ok, lo_bad, float(np.sqrt(hi_ok * lo_bad)), clean


def _note(n_trained: int, n_any: int, clean: bool, n_partial: int) -> str:
    if not n_any:
        return "no LR diverged in any seed: the boundary lies above the LRs run"
    if not n_trained:
        return "no LR trained in every seed: the boundary lies below the LRs run"
    if not clean:
        return "a seed diverged below an LR where every seed trained: boundary ambiguous"
    if n_partial:
        return f"{n_partial} LR(s) partially diverged"
    return ""


def boundary_row(key: tuple, cells: pd.DataFrame, cols: list[str]) -> dict:
    lr, status = cells["lr"], cells["status"]
    trained, partial, diverged = status.eq(TRAINED), status.eq(PARTIAL), status.eq(DIVERGED)
    any_div = partial | diverged
    hi_ok, lo_bad, boundary, clean = _bracket(lr[trained], lr[any_div])
    hi_some, lo_all, boundary_all, clean_all = _bracket(lr[trained | partial], lr[diverged])
    return {**dict(zip(cols, key)),
            "largest_trained": hi_ok, "smallest_any_diverged": lo_bad, "boundary": boundary,
            "clean": clean,
            "largest_any_trained": hi_some, "smallest_all_diverged": lo_all,
            "boundary_all": boundary_all, "clean_all": clean_all,
            "n_lrs": int((~status.eq(NOT_RUN)).sum()), "n_lrs_partial": int(partial.sum()),
            "n_lrs_diverged": int(diverged.sum()), "n_lrs_not_run": int(status.eq(NOT_RUN).sum()),
            "note": _note(int(trained.sum()), int(any_div.sum()), clean, int(partial.sum()))}


def stability_table(cells: pd.DataFrame, group_cols: list[str]) -> pd.DataFrame:
    rows = [boundary_row(as_key(k), g, group_cols)
            for k, g in cells.groupby(group_cols, sort=True, dropna=False)]
    return pd.DataFrame(rows)


def stability_slope_table(stability: pd.DataFrame, family_cols: list[str]) -> pd.DataFrame:
    """Slopes of log2 boundary (onset) and log2 boundary_all against log2 width, each over the
    widths where both ends of its bracket were seen."""
    rows = []
    for k, fam in stability.groupby(family_cols, sort=True, dropna=False):
        fit = width_fit(fam, "boundary", "a boundary inside the LRs run")
        fit_all = width_fit(fam, "boundary_all", "")
        row = {**dict(zip(family_cols, as_key(k))), "n_widths": len(fit.widths),
               "widths": widths_text(fit.widths), **ols_columns(fit),
               "slope_all": fit_all.line.slope if fit_all.line else np.nan,
               "n_widths_all": len(fit_all.widths), "note": fit.note}
        if fit.line is not None and not fit.rows["clean"].all():
            row["note"] = "some boundaries are ambiguous (see the stability table)"
        rows.append(row)
    return pd.DataFrame(rows)
