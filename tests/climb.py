"""A toy search strategy that decides as it goes, `climb`, written as a new strategy is: what
would be the folder mutransfer/sweep/search/climb/ (its decisions, the seam, Tune's side), and
`register`, the two entries outside it (the registry's and the spec's kind). At each width and
seed it runs the LRs of the grid from the lowest upward, one at a time, and stops at the first
that trains worse than the one below it (or diverges). Used by tests/test_search_new_strategy.py
and tests/test_search_sweep.py."""

from __future__ import annotations

import math
from typing import Any

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.plan.listing import table
from mutransfer.sweep.plan.spec import KINDS, Kind
from mutransfer.sweep.search.base import Oracle, Reports, SearchStrategy, TuneSetup, Work
from mutransfer.sweep.search.registry import REGISTRY


def register(monkeypatch) -> None:
    """The two entries outside the strategy's folder (undone at the test's end)."""
    monkeypatch.setitem(REGISTRY, ClimbStrategy.kind, ClimbStrategy)        # the registry entry
    monkeypatch.setitem(KINDS, ClimbStrategy.kind, Kind(part_of_grid=True))  # the spec's kind


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
