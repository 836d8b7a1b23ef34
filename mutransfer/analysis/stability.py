"""Stability boundary per group, and its slope against width per family.

An LR *diverged* when the majority of its seeds diverged (a tie counts as trained). The boundary
of a group lies between the largest LR that trained and the smallest that diverged; its point
estimate is their geometric mean. It is `clean` when every diverged LR lies above every trained
one; otherwise both ends are still reported but the boundary is ambiguous.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.drift import width_fit, widths_text
from mutransfer.analysis.groups import as_key


def boundary_row(key: tuple, cells: pd.DataFrame, cols: list[str]) -> dict:
    trained = cells.loc[~cells["diverged"], "lr"]
    diverged = cells.loc[cells["diverged"], "lr"]
    hi_ok = float(trained.max()) if len(trained) else np.nan
    lo_bad = float(diverged.min()) if len(diverged) else np.nan
    clean = not (len(trained) and len(diverged) and lo_bad < hi_ok)
    if not len(diverged):
        note = "no LR diverged: the boundary lies above the grid"
    elif not len(trained):
        note = "every LR diverged: the boundary lies below the grid"
    elif not clean:
        note = "a diverged LR lies below a trained one: boundary ambiguous"
    else:
        note = ""
    return {**dict(zip(cols, key)), "largest_trained": hi_ok, "smallest_diverged": lo_bad,
            "boundary": float(np.sqrt(hi_ok * lo_bad)), "clean": clean,
            "n_lrs": len(cells), "n_lrs_diverged": len(diverged), "note": note}


def stability_table(cells: pd.DataFrame, group_cols: list[str]) -> pd.DataFrame:
    rows = [boundary_row(as_key(k), g, group_cols)
            for k, g in cells.groupby(group_cols, sort=True, dropna=False)]
    return pd.DataFrame(rows)


def stability_slope_table(stability: pd.DataFrame, family_cols: list[str]) -> pd.DataFrame:
    """Slope of log2 boundary against log2 width, over widths where both ends were seen."""
    rows = []
    for k, fam in stability.groupby(family_cols, sort=True, dropna=False):
        fit = width_fit(fam, "boundary", "a boundary inside the grid")
        row = {**dict(zip(family_cols, as_key(k))), "n_widths": len(fit.widths),
               "widths": widths_text(fit.widths), "slope": np.nan, "stderr": np.nan,
               "intercept": np.nan, "note": fit.note}
        if (line := fit.line) is not None:
            row.update(slope=line.slope, stderr=line.stderr, intercept=line.intercept)
            if not fit.rows["clean"].all():
                row["note"] = "some boundaries are ambiguous (see the stability table)"
        rows.append(row)
    return pd.DataFrame(rows)
