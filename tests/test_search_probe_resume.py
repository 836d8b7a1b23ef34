"""A transfer search that stopped part-way resumes where it was (no Ray, no training).

The transfer search hands out a family's cells a batch at a time, so that which cells run
follows from their results alone (docs/guide.md: "two runs of one sweep, and a run and its
replay, run the same trials"). A sweep interrupted in the middle of a batch leaves a store
holding part of it; re-run, the search must pick up that batch, not plan afresh from the
partial results, or the interrupted sweep runs other trials (and can settle on another lr*)
than the same sweep run through.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mutransfer.configbase import validate
from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, Plan, build_plan
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.transfer.strategy import TransferStrategy
from tests.sweeps import tiny_sweep
from tests.synthetic_sweeps import Planted, synthetic_tables

WIDTHS = [32, 64, 128, 256]
SEEDS = [0, 1]
LOG2_LRS = {"sp": (-14, -2), "mup_ssm": (-11, -3)}
PLANTED = [Planted("sp", 2.0 ** -6, -1.0, stable_base=2.0 ** -3, curvature=0.05),
           Planted("mup_ssm", 2.0 ** -7, 0.0, curvature=0.05)]


def planted_sweep(search: dict[str, Any]) -> tuple[Plan, dict[str, dict[str, Any]]]:
    """The plan of a half-octave sweep over sp (lr* ~ width^-1, diverging above 2^-3 at width
    32) and mup_ssm (lr* ~ width^0), and each cell's planted trials-table row by trial id."""
    axes = {"width": WIDTHS, "parameterization": ["sp", "mup_ssm"], "seed": SEEDS,
            "lr": {p: {"log2": list(r), "per_octave": 2} for p, r in LOG2_LRS.items()}}
    plan = build_plan(validate(SweepSpec, tiny_sweep("resume", axes, search=search)))
    lrs = sorted({float(c.columns["lr"]) for c in plan.cells})
    trials = synthetic_tables(PLANTED, WIDTHS, lrs, SEEDS, noise=0.03).trials
    by_key = {key(r): r for r in trials.to_dict("records")}
    return plan, {c.trial_id: by_key[key(c.columns)] for c in plan.cells}


def key(columns: Any) -> tuple:
    return (str(columns["parameterization"]), int(columns["width"]),
            round(math.log2(float(columns["lr"])), 6), int(columns["seed"]))


def run(plan: Plan, rows: dict[str, dict[str, Any]], stored: list[str]) -> list[str]:
    """Trial ids a run of the sweep over a store holding `stored` runs, in order."""
    strategy = TransferStrategy()
    work = strategy.plan_work(plan, StoreState(complete={t: rows[t] for t in stored}))

    def oracle(cell: Cell) -> dict[str, Any]:
        return {**rows[cell.trial_id], "trial_id": cell.trial_id}

    return [r["trial_id"] for r in strategy.offline(plan, work, oracle)]


@pytest.mark.slow
@pytest.mark.parametrize("search", [{"kind": "transfer"},
                                    {"kind": "transfer", "seed_tolerance": None}])
def test_a_search_stopped_after_any_trial_resumes_to_the_trials_of_one_run_through(search):
    """Stopped after trials spread over the whole run (the store holding those), then re-run,
    the search runs exactly the trials the uninterrupted run runs: none twice, none more,
    none fewer."""
    plan, rows = planted_sweep(search)
    through = run(plan, rows, [])
    assert len(through) == len(set(through))
    for k in range(1, len(through), len(through) // 5):
        rest = run(plan, rows, through[:k])
        assert not set(rest) & set(through[:k]), k
        assert sorted(through[:k] + rest) == sorted(through), k


def test_a_store_holding_results_no_run_of_the_search_has_still_decides_from_all_of_them():
    """A store holding a grid's results (cells the search would not run) is no interrupted
    search: the search plans from every stored result, as before; over a whole grid it runs
    nothing, and over the grid's narrowest width only it runs no cell there again."""
    plan, rows = planted_sweep({"kind": "transfer"})
    assert run(plan, rows, list(rows)) == []
    narrowest = [t for t in rows if rows[t]["width"] == WIDTHS[0]]
    rest = run(plan, rows, narrowest)
    assert rest and all(rows[t]["width"] > WIDTHS[0] for t in rest)
