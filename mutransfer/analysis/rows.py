"""Which rows of a trials table the analysis reads: the columns it needs (one line when one is
missing) and each trial once, as a row that names a cell of the grid (others left out, with a
note saying how many and why)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.errors import UserError
from mutransfer.results.store import DONE_STATUSES

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


def usable_trials(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Each trial once, and only rows that name a cell: a trial id in several rows (a copied
    part, a row written twice) is counted once (a finished row before a failed one), and a
    row without a parameterization, a finite width > 0, an LR > 0 or a whole seed (a damaged
    part: no sweep writes one) is left out. Returns them and a note per kind left out."""
    trials, notes = _each_trial_once(trials.reset_index(drop=True))
    trials, damaged = _naming_a_cell(trials)
    return trials, notes + damaged


def _each_trial_once(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The first row of each trial id, a finished row before a failed one."""
    done = trials["status"].astype(str).isin(DONE_STATUSES).to_numpy()
    order = np.argsort(~done, kind="stable")
    ordered = trials.iloc[order]
    again = (ordered["trial_id"].notna() & ordered.duplicated("trial_id")).to_numpy()
    if not again.any():
        return trials, []
    ids = ordered.loc[again, "trial_id"].nunique()
    note = (f"{int(again.sum())} trial rows left out as duplicates: {ids} trial ids appear in "
            "more than one row of trials/ (a copied part?); each trial is counted once")
    return trials.iloc[np.sort(order[~again])], [note]


def _naming_a_cell(trials: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows with a parameterization, a finite width > 0, an LR > 0 and a whole seed."""
    width, lr, seed = (pd.to_numeric(trials[c], errors="coerce").to_numpy(float)
                       for c in ("width", "lr", "seed"))
    with np.errstate(invalid="ignore"):
        whys = {"no parameterization": trials["parameterization"].isna().to_numpy(),
                "no width > 0": ~(np.isfinite(width) & (width > 0)),
                "no LR > 0": ~(np.isfinite(lr) & (lr > 0)),
                "no whole seed": ~(np.isfinite(seed) & (seed == np.round(seed)))}
    bad = np.logical_or.reduce(list(whys.values()))
    if not bad.any():
        return trials, []
    why = ", ".join(f"{int(m.sum())} {text}" for text, m in whys.items() if m.any())
    return trials.loc[~bad], [f"{int(bad.sum())} trial rows left out as damaged ({why}): they "
                              "name no cell of the grid"]
