"""Grid search: every cell of the grid, the widest first (Tune's grid search over trial ids)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.plan.listing import cell_listing
from mutransfer.sweep.search.base import Oracle, Reports, SearchStrategy, TuneSetup, Work

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState


class GridSearch(SearchStrategy):
    kind = "grid"

    def bounds(self, plan: Plan) -> tuple[int, int]:
        return len(plan.cells), len(plan.cells)

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        return Work(cells=[c for c in plan.cells if c.trial_id not in state.complete])

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        return [oracle(c) for c in work.cells]

    def tune_setup(self, plan: Plan, work: Work, progress: Reports | None) -> TuneSetup:
        from ray import tune  # only when a sweep runs (validate and --dry-run never do)

        return TuneSetup(param_space={"trial_id": tune.grid_search(
            [c.trial_id for c in self.order(plan, work)])})

    @staticmethod
    def order(plan: Plan, work: Work) -> list[Cell]:
        """The cells in the order they start: as the plan lists them (the widest first), or
        with `search.stop` the smallest widths first, so that the crossing allowance comes
        from complete curves before the costly widths run, and within a width the largest LR
        first, so that the LRs far below the optimum start when the better ones have reports
        to be compared with (those above it diverge early, or lead)."""
        if plan.spec.search.stop is None:
            return list(work.cells)
        return sorted(work.cells, key=lambda c: (c.width, -float(c.columns.get("lr", 0.0))))

    def summary(self, plan: Plan, work: Work) -> str:
        return f"{len(plan.cells)} cells"

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        return cell_listing(plan, state)
