"""Adaptive search: one Optuna study (Ray Tune's `OptunaSearch`) per group, side by side.

A Tuner takes one searcher; `Studies` is that searcher. It hands each new trial to the group
with the fewest trials so far that still has budget and fewer than `max_concurrent` trials
running (TPE learns from finished trials, so a study should not run all its trials at once),
and passes each result back to the study that proposed it. Stored trials of a group (from an
earlier run, grid or adaptive) seed its study, so a resumed search continues where it was.
"""

from __future__ import annotations

from typing import Any

import optuna
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.search.base import Work
from mutransfer.sweep.search.objective import OBJECTIVE
from mutransfer.sweep.search.optuna.space import sampler_for, space_of
from mutransfer.sweep.search.searcher import OwnedSearcher


class Studies(OwnedSearcher):
    def __init__(self, studies: dict[str, OptunaSearch], budgets: dict[str, int],
                 max_concurrent: int):
        super().__init__()
        self.studies = studies
        self.left = dict(budgets)
        self.running = dict.fromkeys(budgets, 0)
        self.proposed = dict.fromkeys(budgets, 0)
        self.max_concurrent = max_concurrent

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        open_ = [g for g in self.studies
                 if self.left[g] > 0 and self.running[g] < self.max_concurrent]
        if not open_:
            return Searcher.FINISHED if not any(self.left.values()) else None
        group = min(open_, key=lambda g: self.proposed[g])  # ties: the order given (widest)
        lr = self.studies[group].suggest(trial_id)["lr"]
        self.owner[trial_id] = group
        self.left[group] -= 1
        self.running[group] += 1
        self.proposed[group] += 1
        return {"group": group, "lr": float(lr)}

    def unit_complete(self, group: str, trial_id: str, result: dict | None,
                      error: bool) -> None:
        self.running[group] -= 1
        self.studies[group].on_trial_complete(trial_id, result, error)


def make_searcher(work: Work, search: Search) -> Studies:
    """One OptunaSearch per group of `work` over log LR in the group's range (the samplers and
    spaces of space.py, which strategy.py replays offline)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    studies = {}
    for g in work.groups:
        warm = work.warm.get(g.group_id, [])
        studies[g.group_id] = OptunaSearch(
            space=space_of(g), metric=OBJECTIVE, mode="min",
            sampler=sampler_for(search.seed, g, work),
            points_to_evaluate=[{"lr": lr} for lr, _ in warm] or None,
            evaluated_rewards=[obj for _, obj in warm] or None)
    return Studies(studies, work.budgets, search.max_concurrent)
