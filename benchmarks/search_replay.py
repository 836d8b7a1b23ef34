"""Search strategies and early stopping replayed on a full grid's stored results.

Each variant's decisions are played against a finished grid store (no training): a trial the
strategy runs gets its stored row, and with stopping its stored eval curve is cut at the eval
point where the rule (mutransfer/sweep/search/stopping.py) stops it. Stopping only truncates a
trial, so its losses up to that point are exactly what a live run would have seen; its cost is
the stored trial's tokens (exact) and seconds (proportional to the steps it ran) up to there.
Decisions are causal: a stop at a width compares with the trials of that width finished before
it in the strategy's order (two at a time, the oldest first), and the crossing allowance comes
from the curves complete at the family's other widths so far. A grid with stopping runs its
smallest widths first (so the allowance is known before the wide ones run).

A stopped trial never enters lr*: its LR at that width is left out of the analysis, as a
partially diverged LR is (a stopped seed leaves the LR without all its seeds).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from mutransfer.analysis import analyze
from mutransfer.configbase import validate
from mutransfer.results.store import StoreState, Tables, read_tables
from mutransfer.sweep.plan.cells import Cell, build_plan
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.families import families_of
from mutransfer.sweep.search.grid import GridSearch
from mutransfer.sweep.search.registry import strategy_for
from mutransfer.sweep.search.stopping import StopOptions, crossing_allowance, should_stop

DONE = ("complete", "diverged", "stopped")


@dataclass
class Replayed:
    name: str
    rows: list[dict[str, Any]]
    trials: pd.DataFrame = field(default_factory=pd.DataFrame)   # what the analysis sees
    analysis: Any = None
    note: str = ""


class Curves:
    """The grid's stored eval curves by trial id: (E,) eval losses at the sweep's eval steps."""

    def __init__(self, tables: Tables):
        st = tables.steps.dropna(subset=["eval_loss"])
        self.steps = np.array(sorted(st["step"].unique()), dtype=int)
        wide = st.pivot_table(index="trial_id", columns="step", values="eval_loss",
                              aggfunc="last").reindex(columns=self.steps)
        self.by_id = {t: wide.loc[t].to_numpy(float) for t in wide.index}


class StopSim:
    """The stopping rule played causally over the trials a strategy runs."""

    def __init__(self, cells: list[Cell], curves: Curves, options: StopOptions):
        self.curves, self.options = curves, options
        self.where: dict[str, tuple[int, int, Any]] = {}
        for f, fam in enumerate(families_of(cells)):
            for (w, _, s), tid in fam.ids.items():
                self.where[tid] = (f, w, s)
        self.x = {c.trial_id: math.log2(float(c.columns["lr"])) for c in cells}
        self.seen: dict[tuple, dict[str, np.ndarray]] = {}  # (family, width, seed) -> curves
        self.complete: dict[tuple, dict[str, np.ndarray]] = {}

    def allowance(self, fam: int, width: int) -> np.ndarray:
        mats = []
        for (f, w, _), got in self.complete.items():
            if f == fam and w != width and len(got) >= 2:
                mats.append(np.vstack(list(got.values())))
        return crossing_allowance(mats)

    def play(self, row: dict[str, Any]) -> dict[str, Any]:
        tid = str(row["trial_id"])
        f, w, s = self.where[tid]
        y = self.curves.by_id.get(tid)
        key = (f, w, s)
        peers = self.seen.setdefault(key, {})
        if y is None or row.get("status") != "complete":
            if y is not None:
                peers[tid] = y
            return row
        allow = self.allowance(f, w)
        last = len(self.curves.steps) - 1
        for e in range(1, last):  # not the initial point, not the end
            if e >= len(allow):
                break
            px = np.array([self.x[t] for t in peers] + [self.x[tid]])
            py = np.array([c[e] for c in peers.values()] + [y[e]])
            if should_stop(self.x[tid], float(y[e]), px, py, float(allow[e]), self.options):
                cut = y.copy()
                cut[e + 1:] = np.nan
                peers[tid] = cut
                frac = self.curves.steps[e] / self.curves.steps[last]
                return {**row, "status": "stopped", "final_eval_loss": None,
                        "tokens": float(row["tokens"]) * frac,
                        "wall_time_s": float(row["wall_time_s"]) * frac,
                        "steps_done": int(self.curves.steps[e])}
        peers[tid] = y
        self.complete.setdefault(key, {})[tid] = y
        return row


def replay(grid_store: Path, name: str, search: dict[str, Any],
           stop: StopOptions | None = None, analysis: bool = True,
           seeds: list[int] | None = None, doc: dict[str, Any] | None = None,
           tables: Tables | None = None) -> Replayed:
    """The variant `search` (a `search:` mapping), with `stop`, replayed on `grid_store`
    (only the trials of `seeds` when given: a sweep of those seeds). `doc`: the sweep file
    as a mapping, when the store has none (a store written by a script): its cells are then
    matched to the stored trials by (parameterization, width, LR, seed), not by trial id,
    and the grid is the stored trials on its axes."""
    tables = grid_tables(grid_store, seeds, doc, tables)
    trials = tables.trials[tables.trials["status"].isin(("complete", "diverged"))]
    if doc is None:
        doc = yaml.safe_load((Path(grid_store) / "sweep.yaml").read_text())
    doc = {**{k: v for k, v in doc.items() if k not in ("search", "storage")}, "search": search}
    if seeds is not None:
        doc["axes"] = {**doc["axes"], "seed": list(seeds)}
    plan = build_plan(validate(SweepSpec, doc))
    rows = {str(r["trial_id"]): r for r in trials.to_dict("records")}
    by_key = {cell_key(r): r for r in rows.values()}
    # (a matched row keeps the stored trial id: the analysis reads the store's tables)
    rows.update({c.trial_id: by_key[cell_key(c.columns)]
                 for c in plan.cells if c.trial_id not in rows and cell_key(c.columns) in by_key})
    widths = complete_widths(plan.cells, rows)
    if widths != sorted({c.width for c in plan.cells}):  # a grid still running: its widths
        doc["axes"] = {**doc["axes"], "width": widths}   # that are complete, as a sweep
        plan = build_plan(validate(SweepSpec, doc))
    strategy = strategy_for(plan.spec.search.kind)
    work = strategy.plan_work(plan, StoreState())
    sim = StopSim(plan.cells, Curves(tables), stop) if stop is not None else None
    if sim is not None and plan.spec.search.kind == "grid":  # as a live grid with stop runs
        work.cells = GridSearch.order(_with_stop(plan), work)

    def oracle(cell: Cell) -> dict[str, Any]:
        row = rows.get(cell.trial_id)
        if row is None:
            return {"trial_id": cell.trial_id, "status": "failed"}
        return sim.play(row) if sim is not None else row

    ran = strategy.offline(plan, work, oracle)
    out = Replayed(name, ran)
    if analysis:
        out.trials, out.analysis, out.note = analysed(ran, tables, grid_store)
    return out


def cell_key(columns: Any) -> tuple:
    """A cell's place in the grid: parameterization, width, log2 LR (to 1e-6), seed."""
    return (str(columns["parameterization"]), int(columns["width"]),
            round(math.log2(float(columns["lr"])), 6), int(columns["seed"]))


def on_axes(tables: Tables, doc: dict[str, Any]) -> Tables:
    """The stored trials on the sweep's axes (its widths, LRs and seeds), their ids kept; the
    cells of `doc` whose trial ids differ are matched by `cell_key` in `replay`."""
    plan = build_plan(validate(SweepSpec, {**doc, "search": {"kind": "grid"}}))
    keys = {cell_key(c.columns) for c in plan.cells}
    return with_trials(tables, tables.trials.apply(lambda r: cell_key(r) in keys, axis=1))


def with_trials(tables: Tables, keep: pd.Series) -> Tables:
    """The trials that `keep` marks, and their steps."""
    ids = set(tables.trials.loc[keep, "trial_id"])
    return Tables(tables.trials[keep].reset_index(drop=True),
                  tables.steps[tables.steps["trial_id"].isin(ids)].reset_index(drop=True))


def grid_tables(store: Path, seeds: list[int] | None = None, doc: dict[str, Any] | None = None,
                tables: Tables | None = None) -> Tables:
    """The grid a replay reads: the store's trials (or `tables`), on the axes of `doc` when
    given, of `seeds` only when given."""
    tables = tables if tables is not None else read_tables(store)
    if doc is not None:
        tables = on_axes(tables, doc)
    if seeds is not None:
        tables = with_trials(tables, tables.trials["seed"].isin(seeds))
    return tables


def store_spec(spec: str) -> tuple[Path, dict[str, Any] | None, list[int] | None]:
    """STORE[:SWEEP.yaml][@SEEDS] (the benchmarks' store argument): the store, the sweep file
    as a mapping (None: the store's own sweep.yaml), the seeds (None: every seed)."""
    where, _, seeds_text = spec.partition("@")
    store_text, _, sweep = where.partition(":")
    doc = yaml.safe_load(Path(sweep).read_text()) if sweep else None
    return Path(store_text), doc, [int(s) for s in seeds_text.split(",")] if seeds_text else None


def store_parser(description: str) -> argparse.ArgumentParser:
    """A benchmark's command line: one or more STORE[:SWEEP.yaml][@SEEDS] (`store_spec`)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("stores", nargs="+", metavar="STORE[:SWEEP.yaml][@SEEDS]")
    return p


def _with_stop(plan):
    """The plan with a `search.stop` set, so the grid orders its cells as it would live."""
    from mutransfer.sweep.plan.spec import Stop

    plan.spec.search.stop = Stop()
    return plan


def complete_widths(cells: list[Cell], rows: dict[str, Any]) -> list[int]:
    """The widths at which the store holds every cell (a grid runs the widest first)."""
    by_width: dict[int, bool] = {}
    for c in cells:
        by_width[c.width] = by_width.get(c.width, True) and c.trial_id in rows
    return sorted(w for w, ok in by_width.items() if ok)


def analysed(ran: list[dict[str, Any]], tables: Tables, store: Path):
    """The analysis of what ran: stopped trials and every seed of their LR left out."""
    df = pd.DataFrame(ran)
    stopped = df[df["status"] == "stopped"]
    drop = set(stopped["trial_id"])
    if len(stopped):
        key = ["width", "lr", "parameterization"]
        bad = stopped[key].drop_duplicates()
        hit = df.merge(bad, on=key, how="inner")["trial_id"]
        drop |= set(hit)
    kept = with_trials(tables, tables.trials["trial_id"].isin(set(df["trial_id"]) - drop))
    try:
        return kept.trials, analyze(store, tables=kept), ""
    except Exception as exc:
        return kept.trials, None, f"{type(exc).__name__}: {exc}"
