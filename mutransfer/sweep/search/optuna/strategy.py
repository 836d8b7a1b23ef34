"""Adaptive search with Optuna: per group (every axis but the LR), `trials_per_width` trials at
LRs Optuna's TPE sampler proposes in the group's LR range (Tune's side: studies.py)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from mutransfer.sweep.plan.cells import Cell, Group, Plan
from mutransfer.sweep.plan.identity import group_id, trial_id
from mutransfer.sweep.plan.listing import group_listing
from mutransfer.sweep.search.base import Oracle, Reports, SearchStrategy, TuneSetup, Work
from mutransfer.sweep.search.objective import objective
from mutransfer.sweep.search.optuna.space import sampler_for, space_of

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState


class OptunaStrategy(SearchStrategy):
    kind = "optuna"

    def bounds(self, plan: Plan) -> tuple[int, int]:
        return plan.n_trials, plan.n_trials

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """Each group's budget less the trials of this kind the store holds for it within its
        LR range (a range narrowed since gets its budget there; before, the trials outside it
        used the budget up); the stored trials within the range warm-start its study."""
        done: dict[str, list[dict[str, Any]]] = {}
        for row in state.complete.values():
            done.setdefault(_group_of(row), []).append(row)
        work = Work()
        for g in plan.groups:
            rows = done.get(g.group_id, [])
            ran = sum(1 for r in rows if r.get("search") == self.kind and _in_range(r, g))
            if ran < g.budget:
                work.groups.append(g)
                work.budgets[g.group_id] = g.budget - ran
                work.warm[g.group_id] = _warm_points(rows, g)
        return work

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Each group's study asked and told in turn (Optuna's ask/tell, the same sampler)."""
        import optuna  # here, not at the top: 0.3 s that validate and --dry-run never need

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        rows = []
        for g in work.groups:
            study = optuna.create_study(sampler=sampler_for(plan.spec.search.seed, g, work))
            for lr, obj in work.warm.get(g.group_id, []):
                study.add_trial(optuna.trial.create_trial(
                    params={"lr": lr}, distributions=space_of(g), value=obj))
            for _ in range(work.budgets[g.group_id]):
                trial = study.ask(space_of(g))
                row = oracle(at_lr(g, float(trial.params["lr"])))
                study.tell(trial, objective(row))
                rows.append(row)
        return rows

    def tune_setup(self, plan: Plan, work: Work, progress: Reports | None) -> TuneSetup:
        # Tune's side imports Ray: only when a sweep runs (validate and --dry-run never do)
        from mutransfer.sweep.search.optuna.studies import make_searcher

        return TuneSetup(search_alg=make_searcher(work, plan.spec.search),
                         num_samples=work.n_trials)

    def summary(self, plan: Plan, work: Work) -> str:
        return (f"{len(plan.groups)} groups x {plan.spec.search.trials_per_width} "
                f"{self.kind} trials = {plan.n_trials} trials")

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        return group_listing(plan, work.budgets)


def at_lr(g: Group, lr: float) -> Cell:
    """The trial of group `g` at `lr`, as a cell (its id follows from its config)."""
    config = json.loads(json.dumps(g.config))
    config["train"]["lr"] = lr
    return Cell(trial_id(config), config, {**g.columns, "lr": lr})


def _group_of(row: dict[str, Any]) -> str:
    try:
        return group_id(json.loads(row["config"]))
    except (TypeError, ValueError, KeyError):
        return ""


# how far (in log2) an LR may sit outside a group's range and still be its end: 2^log2(lr) is
# not always lr (2^log2(1e-4) = 1.0000000000000005e-4), so a stored trial at the range's own
# end LR would otherwise fall outside it
LOG2_SLACK = 1e-9


def _in_range(row: dict[str, Any], g: Group) -> bool:
    """A stored trial's LR lies in the group's range (its ends up to float rounding)."""
    lr = float(row["lr"])
    return lr > 0 and math.isfinite(lr) and \
        g.log2_lo - LOG2_SLACK <= math.log2(lr) <= g.log2_hi + LOG2_SLACK


def _warm_points(rows: list[dict[str, Any]], g: Group) -> list[tuple[float, float]]:
    """Stored trials of a group within its LR range: the study starts from what is known.
    An LR at an end of the range (up to float rounding) counts, moved onto the end the
    study's space holds (Optuna refuses a point outside its distribution). Sorted: TPE draws
    from its good trials in the order it was told them, and the store's row order is no part
    of what it holds (before, the same trials in another order gave other LRs)."""
    lo, hi = 2.0 ** g.log2_lo, 2.0 ** g.log2_hi
    return sorted((min(max(float(r["lr"]), lo), hi), objective(r))
                  for r in rows if _in_range(r, g))
