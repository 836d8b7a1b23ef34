"""`analyze(results_dir)`: every table of the transfer analysis from a results folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mutransfer.analysis.choice import WIDTH, Choice, resolve, sweep_section
from mutransfer.analysis.drift import drift_table, scale_drift_table
from mutransfer.analysis.edits import config_axes
from mutransfer.analysis.generations import one_generation
from mutransfer.analysis.groups import WIDTH_AXIS, GroupAxes, Prepared, prepare
from mutransfer.analysis.law import Law, law_tables
from mutransfer.analysis.optimum import GroupOptimum, group_optima, optimum_tables
from mutransfer.analysis.regret import monotonicity_table, regret_table, scale_regret_table
from mutransfer.analysis.rows import check_columns, usable_trials
from mutransfer.analysis.stability import stability_slope_table, stability_table
from mutransfer.analysis.sweeps import sweep_names
from mutransfer.analysis.units import to_units
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
    fit_window: float                # octaves: least half-width of lr*'s fit window
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
    choice: Choice = field(default_factory=Choice)
    scale_axes: list[str] = field(default_factory=list)  # scale axes besides the width role
    scale_drift: pd.DataFrame = field(default_factory=pd.DataFrame)
    scale_regret: pd.DataFrame = field(default_factory=pd.DataFrame)
    law: Law = field(default_factory=lambda: Law(pd.DataFrame(), pd.DataFrame(),
                                                 pd.DataFrame()))

    def scale_name(self, col: str) -> str:
        """How the tables name a scale axis's internal column."""
        return scale_name(self.choice, col)

    @property
    def nothing_trained(self) -> bool:
        """Every trial analysed diverged (a first sweep whose LR range is too high)."""
        return int(self.cells["n_trained"].sum()) == 0 if len(self.cells) else True

    @property
    def name(self) -> str:
        """The sweep's name, else the folder's."""
        return self.sweep or str(self.results_dir).rstrip("/").rsplit("/", 1)[-1]

    def column_names(self) -> dict[str, str]:
        """Internal column -> the name the stored tables give it (the identity by default):
        the width role is the first scale axis's name, `lr` the target's."""
        c = self.choice
        out = {}
        if c.scale[0] != WIDTH:
            axis = c.scale[0]
            out.update({"width": axis, WIDTH_AXIS: WIDTH, "widths": f"{axis}_values",
                        "n_widths": f"n_{axis}_values", "n_widths_all": f"n_{axis}_values_all"})
        if c.target != "lr":
            out.update({"lr": c.target, "lr_opt": "optimum", "lr_argmin": "argmin"})
        return out

    def stored_tables(self) -> dict[str, pd.DataFrame]:
        """The tables as written: columns named after the chosen axes, a `target` column
        when the target is not the LR."""
        names = self.column_names()
        out = {}
        for stem, df in self.tables().items():
            df = df.rename(columns=names)
            if self.choice.target != "lr" and not df.empty:
                df.insert(0, "target", self.choice.target)
            out[stem] = df
        return out

    def tables(self) -> dict[str, pd.DataFrame]:
        """The written tables by file stem, in reading order."""
        return {"lr_opt": self.lr_opt, "drift": self.drift, "stability": self.stability,
                "stability_slope": self.stability_slope, "regret": self.regret,
                "monotonicity": self.monotonicity, "cells": self.cells,
                "scale_drift": self.scale_drift, "scale_regret": self.scale_regret,
                "law": self.law.coef, "law_points": self.law.points,
                "law_holdout": self.law.holdout}


def load_tables(results_dir: str | Path, tables: Tables | None = None) -> Tables:
    """Both tables (read from `results_dir` unless given), or a one-line UserError when
    there are no trials to analyze."""
    root = str(results_dir).rstrip("/")
    if not root.strip():  # '' (or "/"): no folder named; before, a garbled "no trials in "
        raise UserError(f"expected a results folder, got {str(results_dir)!r}")
    if tables is None:
        store = Store(root)
        if not store.exists():
            raise UserError(f"results folder not found: {root}")
        tables = store.tables()
    if tables.trials.empty:
        started = _running_ids(root)
        running = (f"; {len(started)} trials started and none finished yet (their steps are "
                   "in running/): the sweep is running, or was stopped before a trial "
                   "finished (run it again to resume)") if started else ""
        raise UserError(f"no trials in {root} (expected {root}/trials/part-*.parquet): "
                        f"nothing to analyze{running}")
    return tables


NOTHING_TRAINED = ("nothing trained: all {n} trials diverged, so there is no loss to compare "
                   "and no lr*; the stability plot shows where they diverged: lower the LR "
                   "range and run again")


def _notes(prep: Prepared, cells: pd.DataFrame) -> list[str]:
    notes = []
    if not int(cells["n_trained"].sum()):
        notes.append(NOTHING_TRAINED.format(n=len(prep.trials)))
    if prep.n_failed:
        notes.append(f"{prep.n_failed} failed trials excluded (status 'failed'): their cells "
                     "count the seeds that did run")
    if prep.n_beyond_bound:
        notes.append(f"{prep.n_beyond_bound} trials stored as trained counted as diverged: "
                     "their final eval loss is not finite or above the divergence bound "
                     "(initial loss + train.diverge_delta), as no trial the trainer stores as "
                     "trained has")
    if prep.n_no_loss:
        notes.append(f"{prep.n_no_loss} trials excluded: not diverged, yet no final loss stored")
    if prep.n_stopped:
        notes.append(f"{prep.n_stopped} trials stopped early (status 'stopped', search.stop): "
                     f"their LRs at those widths are left out of lr* (with "
                     f"{prep.n_stopped_with} trials of the same cells); the trials table "
                     "lists them with their last losses")
    return notes


def missing_steps_note(trials: pd.DataFrame, steps: pd.DataFrame) -> list[str]:
    """A note when some finished trials have no step rows (their parts deleted or moved): the
    training curves then average the seeds that have them. None when no trial has any (the
    curves are not drawn at all)."""
    if steps.empty:
        return []
    finished = trials[trials["status"].astype(str).isin(("complete", "diverged"))]
    missing = int((~finished["trial_id"].isin(steps["trial_id"])).sum())
    return [f"{missing} finished trials have no step rows (their steps parts are missing): "
            "the training curves average the seeds that have them; lr* and the tables read "
            "the trials table and do not need them"] if missing else []


UNFINISHED = ("{n} trials started and never finished (their steps are in running/, they have "
              "no row in trials/): the sweep is running, or was stopped before it finished "
              "(run it again to resume); these tables are of the {m} trials finished so far")


def _running_ids(results_dir: str | Path) -> set[str]:
    """The ids of the trials with steps in the store's running/ (started, maybe finished);
    none when it cannot be read (tables given without a store, an unreachable location)."""
    try:
        return set(Store(str(results_dir).rstrip("/")).running_trial_ids())
    except Exception:
        return set()


def unfinished_note(results_dir: str | Path, trials: pd.DataFrame) -> str:
    """A note when the store holds attempts that started and have no trial row (an interrupted
    or running sweep: its tables are partial); "" otherwise, or when it cannot be read."""
    left = _running_ids(results_dir) - set(trials["trial_id"].astype(str))
    return UNFINISHED.format(n=len(left), m=len(trials)) if left else ""


def _nothing_left(results_dir: str | Path, n: int, prep: Prepared) -> str:
    """Why no trial of `results_dir` is left to analyze: failed, no loss, stopped early."""
    if prep.n_failed == n:
        return f"all {n} trials in {results_dir} failed: nothing to analyze"
    why = [f"{k} {text}" for k, text in ((prep.n_failed, "failed"),
                                         (prep.n_no_loss, "not diverged yet no final loss"),
                                         (prep.n_stopped + prep.n_stopped_with,
                                          "stopped early or in a stopped cell")) if k]
    return f"none of the {n} trials in {results_dir} has a loss to analyze: {', '.join(why)}"


def scale_name(choice: Choice, col: str) -> str:
    """The chosen name of a scale axis from its internal column (analysis/groups.py)."""
    if col == "width":
        return choice.scale[0]
    return WIDTH if col == WIDTH_AXIS else col


def sweep_text(results_dir: str | Path) -> str | None:
    """The store's sweep.yaml, when it has one."""
    try:
        return Store(str(results_dir).rstrip("/")).read_text("sweep.yaml")
    except Exception:  # an unreachable location, an old store: no file
        return None


def choose(results_dir: str | Path, trials: pd.DataFrame, target: str | None,
           scale: list[str] | None) -> Choice:
    """The command line's choice, else the sweep file's `analysis:`, else the defaults."""
    section = {} if target is not None and scale is not None else \
        sweep_section(sweep_text(results_dir))
    return resolve(trials, target, scale, section)


def linear_step(choice: Choice) -> float | None:
    """A linear target's grid step, which the tables' notes write its values with (the fit's
    role holds 2^(value / step)); None for a target fitted in log2, whose notes write LRs."""
    return None if choice.log else choice.step


def scale_tables(a: Analysis, prep: Prepared) -> None:
    """Drift and regret per scale axis, and the law, when the choice is not the default."""
    if a.choice.is_default:
        return
    cols = prep.scale_cols
    names = {c: a.scale_name(c) for c in cols}
    drift = scale_drift_table(a.lr_opt, prep.group_cols, cols, names)
    drift = drift.reindex(columns=[*prep.group_cols,
                                   *[c for c in drift if c not in prep.group_cols]])
    drift["scale"] = drift["scale"].map(names)
    regret = scale_regret_table(a.cells, a.lr_opt, prep.group_cols, cols,
                                linear_step(a.choice))
    regret["scale"] = regret["scale"].map(names)
    law = law_tables(a.lr_opt, prep.pool_cols, cols, [a.scale_name(c) for c in cols])
    # the points' scale columns by their internal names, as in every other table: the stored
    # tables rename them once (Analysis.column_names). Named for display here, a model width
    # that is a scale axis but not the first was renamed twice, onto the first axis's name:
    # two columns of one name, which Parquet refuses
    law = Law(law.coef, law.points.rename(columns={names[c]: c for c in cols}), law.holdout)
    a.scale_drift = to_units(drift, a.choice, "octave")
    a.scale_regret = to_units(regret, a.choice, "value")
    a.law = Law(to_units(law.coef, a.choice, "octave"), to_units(law.points, a.choice,
                                                                 "octave"),
                to_units(law.holdout, a.choice, "octave"))


def in_units(a: Analysis) -> None:
    """A linear target's tables in its own units (analysis/units.py)."""
    c = a.choice
    if c.log:
        return
    for name in ("lr_opt", "cells", "stability", "regret"):
        setattr(a, name, to_units(getattr(a, name), c, "value"))
    for name in ("drift", "stability_slope"):
        setattr(a, name, to_units(getattr(a, name), c, "octave"))
    a.prepared.trials["lr"] = c.from_role(a.prepared.trials["lr"].to_numpy(float))
    if not a.prepared.stopped.empty:
        a.prepared.stopped["lr"] = c.from_role(a.prepared.stopped["lr"].to_numpy(float))


def analyze(results_dir: str | Path, fit_window: float = FIT_WINDOW,
            tables: Tables | None = None, target: str | None = None,
            scale: list[str] | None = None) -> Analysis:
    """All tables of the transfer analysis of `results_dir` (reads its Parquet tables only;
    pass `tables` when they are already read, as `Store(results_dir).tables()`). `target`
    and `scale`: the hyperparameter whose optimum is found and the scale axes
    (analysis/choice.py; default: the sweep file's `analysis:` section, else lr and width,
    model.n_layer and tokens where they vary)."""
    tables = load_tables(results_dir, tables)
    checked = check_columns(str(results_dir).rstrip("/"), tables.trials)
    trials, row_notes = usable_trials(checked, tables.duplicates)
    if trials.empty:
        raise UserError(f"no trial of {results_dir} can be analyzed: {'; '.join(row_notes)}")
    unfinished = unfinished_note(results_dir, trials)
    trials, generation_note = one_generation(trials)
    trials, edits_note = config_axes(trials)
    if generation_note or row_notes:  # the steps of the trials left out go too
        tables = Tables(trials, tables.steps[tables.steps["trial_id"].isin(trials["trial_id"])])
    ran = trials[trials["status"].astype(str) != "failed"]  # check_columns gave it a status
    choice = choose(results_dir, ran, target, scale)
    prep = prepare(trials, choice)
    if prep.trials.empty:
        raise UserError(_nothing_left(results_dir, len(trials), prep))
    optima = group_optima(prep, fit_window)
    lr_opt, cells = optimum_tables(optima, prep.group_cols, prep.stopped_lrs,
                                   linear_step(choice))
    fam = prep.family_cols
    stability = stability_table(cells, prep.group_cols, prep.trials)
    widths = sorted(int(w) for w in np.unique(prep.trials["width"]))
    several = len(widths) > 1
    label = scale_name(choice, "width")  # the width role's name, for the tables' notes
    sweep, sweeps_note = sweep_names(prep.trials)
    a = Analysis(
        results_dir=str(results_dir), sweep=sweep, axes=prep.axes, fixed=prep.fixed,
        widths=widths, n_trials=len(prep.trials), n_failed=prep.n_failed,
        fit_window=fit_window, cells=cells, lr_opt=lr_opt,
        drift=drift_table(lr_opt, optima, fam, label),
        stability=stability,
        stability_slope=stability_slope_table(stability, fam, label),
        regret=regret_table(cells, lr_opt, fam, step=linear_step(choice)) if several
        else pd.DataFrame(),
        monotonicity=monotonicity_table(lr_opt, fam, label) if several else pd.DataFrame(),
        prepared=prep, steps=tables.steps, optima=optima, notes=_notes(prep, cells),
        choice=choice, scale_axes=prep.scale_axes)
    a.notes += missing_steps_note(prep.trials, tables.steps)
    if edits_note:
        a.notes.insert(0, edits_note)
    if generation_note:
        a.notes.insert(0, generation_note)
    a.notes[:0] = row_notes
    if sweeps_note:
        a.notes.insert(0, sweeps_note)
    if unfinished:
        a.notes.insert(0, unfinished)
    scale_tables(a, prep)
    in_units(a)
    return a
