"""Which rows of a trials table the analysis reads: the columns it needs (one line when one is
missing) and each trial once, as a row that names a cell of the grid (others left out, with a
note saying how many and why)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.errors import UserError
from mutransfer.results.store import duplicates_note, each_trial_once

# The trials table's columns without which no trial can be analysed (docs/results-format.md);
# `diverged` is taken from `status` where a table lacks it, and either one will do.
NEEDED = ("trial_id", "width", "parameterization", "lr", "seed", "final_eval_loss")


def check_columns(root: str, trials: pd.DataFrame) -> pd.DataFrame:
    """The trials with the columns the analysis reads, or a one-line UserError naming those
    missing; a table without `diverged` takes it from `status`, one without `status` from
    `diverged` (a trials row is written when its trial ends: complete or diverged)."""
    missing = [c for c in NEEDED if c not in trials]
    if "status" not in trials and "diverged" not in trials:
        missing.append("status")
    if missing:
        raise UserError(f"{root}: the trials table has no {', '.join(missing)} column"
                        f"{'s' if len(missing) > 1 else ''}: not a results store this version "
                        "can analyze (docs/results-format.md)")
    if "diverged" not in trials:
        trials = trials.assign(diverged=trials["status"].astype(str).eq("diverged"))
    if "status" not in trials:
        trials = trials.assign(status=np.where(trials["diverged"].fillna(False).astype(bool),
                                               "diverged", "complete"))
    return trials


def usable_trials(trials: pd.DataFrame, duplicates: pd.DataFrame | None = None
                  ) -> tuple[pd.DataFrame, list[str]]:
    """Each trial once, and only rows that name a cell: a trial id in several rows (a copied
    part, a row written twice) is counted once (each_trial_once: a finished row before a
    failed one), and a row without a parameterization, a whole width > 0, an LR > 0 or a
    whole seed (a damaged part: no sweep writes one) is left out. (A width of 0.5 or 48.5,
    e.g. a width multiplier from another program, was cut to 0 or 48: log2 0 = -inf made
    every drift wrong without a word.) `duplicates`: the rows the
    store's reader already left out so (Tables.duplicates), in the same note. Returns the
    trials and a note per kind left out."""
    trials, again = each_trial_once(trials.reset_index(drop=True))
    left_out = [d[["trial_id"]] for d in (duplicates, again) if d is not None and len(d)]
    note = duplicates_note(pd.concat(left_out)) if left_out else None
    trials, damaged = _naming_a_cell(trials)
    return trials, ([note] if note else []) + damaged


def _naming_a_cell(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows with a parameterization, a whole width > 0, an LR > 0 and a whole seed."""
    width, lr, seed = (pd.to_numeric(trials[c], errors="coerce").to_numpy(float)
                       for c in ("width", "lr", "seed"))
    with np.errstate(invalid="ignore"):
        whys = {"no parameterization": trials["parameterization"].isna().to_numpy(),
                "no width > 0": ~(np.isfinite(width) & (width > 0)),
                "a width not whole": np.isfinite(width) & (width > 0)
                & (width != np.round(width)),
                "no LR > 0": ~(np.isfinite(lr) & (lr > 0)),
                "no whole seed": ~(np.isfinite(seed) & (seed == np.round(seed)))}
    bad = np.logical_or.reduce(list(whys.values()))
    if not bad.any():
        return trials, []
    why = ", ".join(f"{int(m.sum())} {text}" for text, m in whys.items() if m.any())
    return trials.loc[~bad], [f"{int(bad.sum())} trial rows left out as damaged ({why}): they "
                              "name no cell of the grid"]
