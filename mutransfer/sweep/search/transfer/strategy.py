"""Transfer search: the whole LR grid at the smallest widths, a window around the predicted
optimum at every wider one, settled by the analysis's own fit window (the decisions:
decisions.py; Tune's side: searcher.py; the dry-run table: listing.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mutransfer.sweep.plan.cells import Plan
from mutransfer.sweep.search.base import Oracle, Reports, SearchStrategy, TuneSetup, Work
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch
from mutransfer.sweep.search.transfer.listing import transfer_listing, transfer_summary

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState


def search_of(work: Work) -> TransferSearch:
    """The transfer search `plan_work` gave `work`."""
    assert isinstance(work.state, TransferSearch)
    return work.state


class TransferStrategy(SearchStrategy):
    kind = "transfer"

    def bounds(self, plan: Plan) -> tuple[int, int]:
        least, _, most = TransferSearch.of_cells(plan.cells, plan.spec.search, {}).bounds()
        return least, most

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """The search starts from every result stored for its cells."""
        return Work(cells=[c for c in plan.cells if c.trial_id not in state.complete],
                    state=TransferSearch.of_cells(plan.cells, plan.spec.search, state.complete))

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Two at a time, the oldest finishing first, as on two workers."""
        search = search_of(work)
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

    def tune_setup(self, plan: Plan, work: Work, progress: Reports | None) -> TuneSetup:
        # Tune's side imports Ray: only when a sweep runs (validate and --dry-run never do)
        from mutransfer.sweep.search.transfer.searcher import TransferSearcher

        return TuneSetup(search_alg=TransferSearcher(search_of(work), progress),
                         num_samples=len(work.cells))

    def summary(self, plan: Plan, work: Work) -> str:
        search = work.state if isinstance(work.state, TransferSearch) else \
            TransferSearch.of_cells(plan.cells, plan.spec.search, {})
        return transfer_summary(search)

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        return transfer_listing(search_of(work))
