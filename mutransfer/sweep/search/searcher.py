"""Ray Tune's searcher base for the strategies whose trials each belong to a unit they name
(an Optuna study's group, a transfer search's cell)."""

from __future__ import annotations

from typing import Any

from ray.tune.search import Searcher

from mutransfer.sweep.search.objective import OBJECTIVE


class OwnedSearcher(Searcher):
    """A searcher whose every trial belongs to a unit it names (an Optuna study's group, a
    transfer search's cell): the trial's one result, at its end, goes back to that unit."""

    def __init__(self) -> None:
        super().__init__(metric=OBJECTIVE, mode="min")
        self.owner: dict[str, str] = {}  # Tune's trial id -> the unit

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return True  # the subclass set up its own space

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass  # a report per eval point; the unit learns from the last one, at the end

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        unit = self.owner.pop(trial_id, None)
        if unit is not None:
            self.unit_complete(unit, trial_id, result, error)

    def unit_complete(self, unit: str, trial_id: str, result: dict | None,
                      error: bool) -> None:
        raise NotImplementedError
