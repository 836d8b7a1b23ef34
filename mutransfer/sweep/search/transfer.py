"""Transfer search: the whole LR grid at the smallest widths, a window around the predicted
optimum at every wider one, settled by the analysis's own fit window (the decisions:
mutransfer/sweep/transfer.py; Tune's side: mutransfer/sweep/transfer_searcher.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mutransfer.sweep.grid import Plan
from mutransfer.sweep.search.base import Oracle, SearchStrategy, TuneSetup, Work
from mutransfer.sweep.transfer import Outcome, TransferSearch

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState
    from mutransfer.sweep.progress import Progress


class TransferStrategy(SearchStrategy):
    kind = "transfer"
    part_of_grid = True

    def bounds(self, plan: Plan) -> tuple[int, int]:
        least, _, most = TransferSearch.of_cells(plan.cells, plan.spec.search, {}).bounds()
        return least, most

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """The search starts from every result stored for its cells."""
        return Work(cells=[c for c in plan.cells if c.trial_id not in state.complete],
                    search=TransferSearch.of_cells(plan.cells, plan.spec.search, state.complete))

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Two at a time, the oldest finishing first, as on two workers."""
        search = work.search
        assert search is not None
        by_id = {c.trial_id: c for c in plan.cells}
        rows, running = [], []
        while True:
            while len(running) < 2 and (tid := search.next_trial()) is not None:
                running.append(tid)
            if not running:
                return rows
            tid = running.pop(0)
            row = oracle(by_id[tid])
            if row.get("status") == "failed":
                search.fail(tid)
            else:
                search.finish(tid, Outcome.of_row(row))
                rows.append(row)

    def tune_setup(self, plan: Plan, work: Work, progress: Progress | None) -> TuneSetup:
        from mutransfer.sweep.transfer_searcher import TransferSearcher

        assert work.search is not None
        return TuneSetup(search_alg=TransferSearcher(work.search, progress),
                         num_samples=len(work.cells))

    def summary(self, plan: Plan, work: Work) -> str:
        from mutransfer.sweep.listing import transfer_summary

        search = work.search or TransferSearch.of_cells(plan.cells, plan.spec.search, {})
        return transfer_summary(search)

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        from mutransfer.sweep.listing import transfer_listing

        assert work.search is not None
        return transfer_listing(work.search)
