"""`analyze(results_dir)`: every table of the transfer analysis from a results folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mutransfer.analysis.drift import drift_table
from mutransfer.analysis.groups import GroupAxes, Prepared, prepare
from mutransfer.analysis.optimum import GroupOptimum, group_optima, optimum_tables
from mutransfer.analysis.regret import monotonicity_table, regret_table
from mutransfer.analysis.stability import stability_slope_table, stability_table
from mutransfer.analysis_defaults import FIT_WINDOW
from mutransfer.errors import UserError
from mutransfer.results.store import Store, Tables


@dataclass
class Analysis(GroupAxes):
    """The tables of one results folder, and how they were computed."""

    results_dir: str                 # as given: a local folder or a URI the store can open
    sweep: str
    axes: list[str]                  # group axes besides parameterization and width
    fixed: dict[str, object]         # extra columns with a single value in this folder
    widths: list[int]
    n_trials: int                    # trials analysed (failed ones excluded)
    n_failed: int
    fit_window: float                # octaves: half-width of the window lr* is fitted in
    cells: pd.DataFrame
    lr_opt: pd.DataFrame
    drift: pd.DataFrame
    stability: pd.DataFrame
    stability_slope: pd.DataFrame
    regret: pd.DataFrame
    monotonicity: pd.DataFrame
    prepared: Prepared = field(repr=False)   # the trials as analysed, reused by the plots
    steps: pd.DataFrame = field(repr=False)  # the steps table as read, for the training curves
    optima: list[GroupOptimum] = field(repr=False, default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The sweep's name, else the folder's."""
        return self.sweep or str(self.results_dir).rstrip("/").rsplit("/", 1)[-1]

    def tables(self) -> dict[str, pd.DataFrame]:
        """The written tables by file stem, in reading order."""
        return {"lr_opt": self.lr_opt, "drift": self.drift, "stability": self.stability,
                "stability_slope": self.stability_slope, "regret": self.regret,
                "monotonicity": self.monotonicity, "cells": self.cells}


def load_tables(results_dir: str | Path, tables: Tables | None = None) -> Tables:
    """Both tables (read from `results_dir` unless given), or a one-line UserError when
    there are no trials to analyze."""
    root = str(results_dir).rstrip("/")
    if tables is None:
        store = Store(root)
        if not store.exists():
            raise UserError(f"results folder not found: {root}")
        tables = store.tables()
    if tables.trials.empty:
        raise UserError(f"no trials in {root} (expected {root}/trials/part-*.parquet): "
                        "nothing to analyze")
    return tables


def _notes(prep: Prepared) -> list[str]:
    notes = []
    if prep.n_failed:
        notes.append(f"{prep.n_failed} failed trials excluded (status 'failed'): their cells "
                     "count the seeds that did run")
    if prep.n_no_loss:
        notes.append(f"{prep.n_no_loss} trials excluded: not diverged, yet no final loss stored")
    if prep.n_stopped:
        notes.append(f"{prep.n_stopped} trials stopped early (status 'stopped', search.stop): "
                     f"their LRs at those widths are left out of lr* (with "
                     f"{prep.n_stopped_with} trials of the same cells); the trials table "
                     "lists them with their last losses")
    return notes


def analyze(results_dir: str | Path, fit_window: float = FIT_WINDOW,
            tables: Tables | None = None) -> Analysis:
    """All tables of the transfer analysis of `results_dir` (reads its Parquet tables only;
    pass `tables` when they are already read, as `Store(results_dir).tables()`)."""
    tables = load_tables(results_dir, tables)
    trials = tables.trials
    prep = prepare(trials)
    if prep.trials.empty:
        raise UserError(f"all {prep.n_failed} trials in {results_dir} failed: nothing to analyze")
    optima = group_optima(prep, fit_window)
    lr_opt, cells = optimum_tables(optima, prep.group_cols)
    fam = prep.family_cols
    stability = stability_table(cells, prep.group_cols)
    widths = sorted(int(w) for w in np.unique(prep.trials["width"]))
    several = len(widths) > 1
    sweep = str(trials["sweep"].dropna().iloc[0]) if trials["sweep"].notna().any() else ""
    return Analysis(
        results_dir=str(results_dir), sweep=sweep, axes=prep.axes, fixed=prep.fixed,
        widths=widths, n_trials=len(prep.trials), n_failed=prep.n_failed,
        fit_window=fit_window, cells=cells, lr_opt=lr_opt,
        drift=drift_table(lr_opt, optima, fam),
        stability=stability,
        stability_slope=stability_slope_table(stability, fam),
        regret=regret_table(cells, lr_opt, fam) if several else pd.DataFrame(),
        monotonicity=monotonicity_table(lr_opt, fam) if several else pd.DataFrame(),
        prepared=prep, steps=tables.steps, optima=optima, notes=_notes(prep))
