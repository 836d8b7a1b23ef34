"""Adding a search strategy that decides as it goes takes 1 folder (its code) + 1 registry
entry + its kind in the spec (docs/search-strategies.md). This module is that folder for a toy
strategy, `climb`: at each width and seed it runs the LRs of the grid from the lowest upward,
one at a time, and stops at the first that trains worse than the one below it (or diverges).
The test registers it in exactly those two places and runs it through the dry run, the
offline replay and a real sweep on Ray: nothing else of the sweep knows it."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest
import yaml

import mutransfer
from mutransfer.errors import UserError
from mutransfer.results.store import StoreState, read_tables
from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.plan.listing import table
from mutransfer.sweep.plan.spec import KINDS, Kind
from mutransfer.sweep.run.driver import dry_run, prepare
from mutransfer.sweep.search.base import (
    Oracle,
    Reports,
    SearchStrategy,
    TuneSetup,
    Work,
)
from mutransfer.sweep.search.registry import REGISTRY, plan_work, strategy_for
from tests.sweeps import tiny_sweep

# -- the strategy's folder (search/climb/): its decisions, the seam, Tune's side ----------------


class Climb:
    """Which cells the climb wants, from the outcomes so far (a pure function of them)."""

    def __init__(self, cells: list[Cell], rows: dict[str, dict[str, Any]]):
        chains: dict[str, list[Cell]] = {}
        for c in cells:
            key = repr(sorted((k, str(v)) for k, v in c.columns.items() if k != "lr"))
            chains.setdefault(key, []).append(c)
        self.chains = [sorted(ch, key=lambda c: float(c.columns["lr"])) for ch in chains.values()]
        self.rows = {t: r for t, r in rows.items() if t in {c.trial_id for c in cells}}
        self.running: set[str] = set()
        self.failed: set[str] = set()
        self.here: set[str] = set()

    def wanted(self) -> list[str]:
        out = []
        for chain in self.chains:
            best = float("inf")
            for cell in chain:
                row = self.rows.get(cell.trial_id)
                if row is None:
                    if cell.trial_id not in self.failed:
                        out.append(cell.trial_id)
                    break
                loss = row.get("final_eval_loss")  # None or NaN: diverged
                if not isinstance(loss, (int, float)) or not math.isfinite(loss) or loss >= best:
                    break
                best = loss
        return out

    def to_run(self) -> list[str]:
        return [t for t in self.wanted() if t not in self.running]

    def started_count(self) -> int:
        return len(self.here) + len(self.failed) + len(self.running)

    def next_trial(self) -> str | None:
        todo = self.to_run()
        if todo:
            self.running.add(todo[0])
        return todo[0] if todo else None

    def finish(self, trial_id: str, row: dict[str, Any]) -> None:
        self.running.discard(trial_id)
        self.here.add(trial_id)
        self.rows[trial_id] = row

    def fail(self, trial_id: str) -> None:
        self.running.discard(trial_id)
        self.failed.add(trial_id)


class ClimbStrategy(SearchStrategy):
    kind = "climb"

    def bounds(self, plan: Plan) -> tuple[int, int]:
        return len(Climb(plan.cells, {}).chains), len(plan.cells)

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        return Work(cells=[c for c in plan.cells if c.trial_id not in state.complete],
                    state=Climb(plan.cells, state.complete))

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        climb, rows = work.state, []
        assert isinstance(climb, Climb)
        by_id = {c.trial_id: c for c in plan.cells}
        while (tid := climb.next_trial()) is not None:
            rows.append(oracle(by_id[tid]))
            climb.finish(tid, rows[-1])
        return rows

    def tune_setup(self, plan: Plan, work: Work, progress: Reports | None) -> TuneSetup:
        from ray.tune.search import Searcher

        from mutransfer.sweep.search.searcher import OwnedSearcher

        climb = work.state
        assert isinstance(climb, Climb)

        class ClimbSearcher(OwnedSearcher):
            def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
                cell = climb.next_trial()
                if cell is None:
                    return Searcher.FINISHED if not climb.running else None
                self.owner[trial_id] = cell
                return {"trial_id": cell}

            def unit_complete(self, cell: str, trial_id: str, result: dict | None,
                              error: bool) -> None:
                climb.fail(cell) if error or not result else climb.finish(cell, result)

        return TuneSetup(search_alg=ClimbSearcher(), num_samples=len(work.cells))

    def summary(self, plan: Plan, work: Work) -> str:
        least, most = self.bounds(plan)
        return f"climb over {most} cells: at least {least}"

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        wanted = set(work.state.to_run()) if work.state is not None else set()
        return table([{"trial_id": c.trial_id, **c.columns,
                       "state": "done" if c.trial_id in state.complete else
                       "runs now" if c.trial_id in wanted else "waits"} for c in plan.cells],
                     ("trial_id", "state"))


# -- the two lines outside the folder ------------------------------------------------------------

@pytest.fixture
def climb_registered(monkeypatch):
    monkeypatch.setitem(REGISTRY, ClimbStrategy.kind, ClimbStrategy)        # the registry entry
    monkeypatch.setitem(KINDS, ClimbStrategy.kind, Kind(part_of_grid=True))  # the spec's kind


LRS = [0.0005, 0.002, 0.008, 0.032, 0.128]


def doc(tmp_path, lrs=LRS) -> dict:
    return tiny_sweep("climb", {"width": [16, 32], "lr": lrs, "seed": [0]}, steps=4,
                      eval_every=2, storage=str(tmp_path / "results"),
                      search={"kind": "climb"})


def test_an_unregistered_kind_is_refused_in_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(UserError,
                       match="search.kind: Input should be 'grid', 'optuna' or 'transfer'"):
        prepare(doc(tmp_path), check_data=False)


def test_the_dry_run_shows_what_the_new_strategy_runs_first(tmp_path, climb_registered):
    out = dry_run(doc(tmp_path))
    assert "sweep climb: climb over 10 cells: at least 2; 0 complete, 2 to run now" in out
    assert out.count("runs now") == 2 and out.count("waits") == 8  # the lowest LR per width
    assert "a climb search runs a part of it" in out  # the cost table's title


def test_offline_the_new_strategy_climbs_until_the_loss_turns_and_resumes(tmp_path,
                                                                          climb_registered):
    plan = prepare(doc(tmp_path), check_data=False)
    strategy = strategy_for("climb")

    def oracle(cell: Cell) -> dict[str, Any]:  # a bowl with its bottom at LR 0.008
        lr = float(cell.columns["lr"])
        return {"trial_id": cell.trial_id, "final_eval_loss": abs(lr - 0.008)}

    ran = strategy.offline(plan, plan_work(plan, StoreState()), oracle)
    assert len(ran) == 10 - 2  # up to 0.032 (worse than 0.008) at each width, not 0.128
    part = {r["trial_id"]: r for r in ran[:3]}
    rest = strategy.offline(plan, plan_work(plan, StoreState(complete=part)), oracle)
    assert sorted(r["trial_id"] for r in [*ran[:3], *rest]) == sorted(r["trial_id"] for r in ran)


@pytest.mark.slow
def test_a_real_sweep_runs_the_new_strategy_on_ray_and_a_rerun_runs_nothing(
        tmp_path, climb_registered, ray_local):
    lrs = [0.002, 0.032, 0.5, 64.0, 1024.0]  # 64 trains worse or diverges: the climb stops
    spec = doc(tmp_path, lrs)
    result = mutransfer.run(spec, out=io.StringIO())
    assert result.ok and result.failed == 0
    trials = read_tables(spec["storage"]).trials
    assert (trials["search"] == "climb").all() and len(trials) == result.to_run
    for _, ran in trials.groupby("width"):  # the lowest LRs, up to the first that turned
        assert sorted(ran["lr"]) == lrs[:len(ran)] and 2 <= len(ran) <= 4
    again = mutransfer.run(yaml.safe_load(yaml.safe_dump(spec)), out=io.StringIO())
    assert again.to_run == 0


def test_a_strategy_missing_a_method_of_the_seam_cannot_be_made():
    class Half(SearchStrategy):  # bounds only: no plan_work, offline, tune_setup, ...
        kind = "half"

        def bounds(self, plan: Plan) -> tuple[int, int]:
            return 0, 0

    with pytest.raises(TypeError, match="abstract method.*listing"):
        Half()
    ClimbStrategy()  # every method there: it can
