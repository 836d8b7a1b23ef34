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
are neither trained nor diverged: the bracket simply spans them. Nor are LRs where search.stop
stopped a trial early (the cells table's `stopped`): counted as stopped, not as not run.

"Unstable but trained": a trial that completed although its smoothed train loss went above the
divergence bound on the way (`steps_above_bound` > 0 in the trials table; it spiked and
recovered, mutransfer/divergence.py). `smallest_unstable` is the smallest LR where a seed did
that, `n_lrs_unstable` how many LRs had one, `max_excursion` the largest spike (nats over the
initial loss) among the group's trained trials: a boundary the rule does not set, and how close
the LRs below it came. NaN where the trials table predates those columns.

The slope of the boundary against width treats each boundary as the bracket it is
(analysis/brackets.py): its interval holds every slope of a line through all the brackets,
widened for the boundaries' scatter about a power law. An ambiguous boundary (its bracket's
ends reversed) is left out of the slope, and the note says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.brackets import bracket_slope
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
    stopped = cells["stopped"].astype(bool) if "stopped" in cells \
        else pd.Series(False, index=cells.index)
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
            "n_lrs_diverged": int(diverged.sum()),
            "n_lrs_not_run": int((status.eq(NOT_RUN) & ~stopped).sum()),
            "n_lrs_stopped": int(stopped.sum()),
            "note": _note(int(trained.sum()), int(any_div.sum()), clean, int(partial.sum()))}


def unstable_columns(trials: pd.DataFrame | None) -> dict:
    """The spikes of one group's trials that trained (did not diverge): the smallest LR where
    one went above the bound, how many LRs had one, and the largest excursion."""
    if trials is None or "steps_above_bound" not in trials or "max_excursion" not in trials:
        return {"smallest_unstable": np.nan, "n_lrs_unstable": np.nan, "max_excursion": np.nan}
    trained = trials[~trials["diverged"].astype(bool)]
    above = pd.to_numeric(trained["steps_above_bound"], errors="coerce")
    excursion = pd.to_numeric(trained["max_excursion"], errors="coerce")
    if above.isna().all():
        return {"smallest_unstable": np.nan, "n_lrs_unstable": np.nan, "max_excursion": np.nan}
    lrs = trained["lr"][above.fillna(0) > 0]
    return {"smallest_unstable": float(lrs.min()) if len(lrs) else np.nan,
            "n_lrs_unstable": int(lrs.nunique()),
            "max_excursion": float(excursion.max()) if excursion.notna().any() else np.nan}


def stability_table(cells: pd.DataFrame, group_cols: list[str],
                    trials: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per group: its boundaries from the cells, and (given the prepared `trials`)
    the spikes of the trials that trained."""
    by_group = ({as_key(k): g for k, g in trials.groupby(group_cols, sort=True, dropna=False)}
                if trials is not None else {})
    rows = []
    for k, g in cells.groupby(group_cols, sort=True, dropna=False):
        key = as_key(k)
        rows.append({**boundary_row(key, g, group_cols),
                     **unstable_columns(by_group.get(key) if trials is not None else None)})
    return pd.DataFrame(rows)


def _bracket_columns(fit_rows: pd.DataFrame, x: np.ndarray) -> dict:
    """The bracket slope of the onset boundary (analysis/brackets.py) over `fit_rows`."""
    if len(x) < 2:
        return {"ci_low": np.nan, "ci_high": np.nan, "feasible_low": np.nan,
                "feasible_high": np.nan, "scatter": np.nan, "ci_df": np.nan}
    b = bracket_slope(x, np.log2(fit_rows["largest_trained"].to_numpy(float)),
                      np.log2(fit_rows["smallest_any_diverged"].to_numpy(float)))
    return {"ci_low": b.ci_low, "ci_high": b.ci_high, "feasible_low": b.feasible_low,
            "feasible_high": b.feasible_high, "scatter": b.scatter, "ci_df": b.df,
            "bracket_note": b.note}


def _left_out(fam: pd.DataFrame, label: str) -> str:
    """Which widths of a family the slope leaves out, and what each still says: every LR
    diverged (its boundary lies below the LRs run: a bound the bracket fit cannot take), or
    none did (above them)."""
    out = fam[~np.isfinite(fam["boundary"].to_numpy(float))]
    parts = []
    for _, r in out.sort_values("width").iterrows():
        trained = np.isfinite(float(r["largest_trained"]))
        diverged = np.isfinite(float(r["smallest_any_diverged"]))
        if trained and diverged:  # an ambiguous bracket (_clean_only)
            parts.append(f"{label} {int(r['width'])} (ambiguous: a seed diverged below an LR "
                         f"where every seed trained)")
        elif trained or diverged:
            where = "above" if trained else "below"
            parts.append(f"{label} {int(r['width'])} (its boundary lies {where} the LRs run)")
    return ("left out: " + ", ".join(parts)) if parts else ""


def _clean_only(fam: pd.DataFrame) -> pd.DataFrame:
    """The family's boundaries with the ambiguous ones (not `clean`: a seed diverged below an
    LR where every seed trained, so the bracket's ends are reversed) set to NaN: no line
    passes through a reversed bracket, and one far, failed seed would set the slope."""
    return fam.assign(boundary=fam["boundary"].where(fam["clean"].astype(bool)),
                      boundary_all=fam["boundary_all"].where(fam["clean_all"].astype(bool)))


def stability_slope_table(stability: pd.DataFrame, family_cols: list[str],
                          label: str = "width") -> pd.DataFrame:
    """Slopes of log2 boundary (onset) and log2 boundary_all against log2 width, each over the
    widths where both ends of its bracket were seen; the onset's 95% interval from its
    brackets (ci_low, ci_high; analysis/brackets.py), the OLS one beside it; ambiguous
    boundaries left out (_clean_only). `label`: the
    name of the axis in the width role, for the notes."""
    rows = []
    for k, fam in stability.groupby(family_cols, sort=True, dropna=False):
        fam = _clean_only(fam)
        fit = width_fit(fam, "boundary", "an unambiguous boundary inside the LRs run",
                        label=label)
        fit_all = width_fit(fam, "boundary_all", "", label=label)
        brackets = _bracket_columns(fit.rows, fit.x)
        note = brackets.pop("bracket_note", "")
        row = {**dict(zip(family_cols, as_key(k))), "n_widths": len(fit.widths),
               "widths": widths_text(fit.widths), **ols_columns(fit), **brackets,
               "slope_all": fit_all.line.slope if fit_all.line else np.nan,
               "n_widths_all": len(fit_all.widths), "note": fit.note}
        notes = [fit.note, note]
        if fit.line is not None:
            notes.append(_left_out(fam, label))
        row["note"] = "; ".join(filter(None, notes))
        rows.append(row)
    return pd.DataFrame(rows)
