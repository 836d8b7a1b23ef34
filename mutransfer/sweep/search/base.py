"""The search-strategy protocol: what the sweep asks a strategy instead of branching on its kind.

A strategy decides which trials a sweep runs. It is a pure function of the plan and of the
finished outcomes in the store (no Ray, no I/O) up to `tune_setup`, which builds what Ray
Tune needs to run its work. Every registered strategy passes tests/test_search_contract.py:
replaying a store gives the same plan, a new width runs only what it must, its counts bracket
what runs, and a finished store runs nothing. docs/search-strategies.md says how to add one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from mutransfer.sweep.grid import Cell, Group, Plan

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState
    from mutransfer.sweep.progress import Progress
    from mutransfer.sweep.transfer import TransferSearch

# a trial's outcome offline: the trials-table row a unit (a cell, or a group at an LR) gives
Oracle = Callable[[Cell], dict[str, Any]]


@dataclass
class Work:
    """What this run executes: grid cells, or adaptive groups with their remaining budget."""

    cells: list[Cell] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    budgets: dict[str, int] = field(default_factory=dict)  # group id -> trials still to run
    warm: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # (lr, objective)
    search: TransferSearch | None = None  # a transfer search over `cells` (the unfinished ones)
    horizon: dict[str, dict[str, Any]] = field(default_factory=dict)  # trial id -> its role

    @property
    def n_trials(self) -> int:
        """Trials to run; for a transfer search, those it asks for now (it decides as it goes)."""
        if self.search is not None:
            return len(self.search.to_run())
        return len(self.cells) + sum(self.budgets.values())


@dataclass
class TuneSetup:
    """What a strategy gives Ray Tune: a searcher (None: a grid search over `param_space`),
    the parameter space, how many samples, and a scheduler (None: FIFO)."""

    search_alg: Any = None
    param_space: dict[str, Any] = field(default_factory=dict)
    num_samples: int = 1
    scheduler: Any = None


class SearchStrategy:
    """One way of searching the LR axis (`search.kind`). Subclasses set `kind` and implement
    the methods below; `adaptive` strategies run groups (an LR range) instead of grid cells."""

    kind: ClassVar[str] = ""
    adaptive: ClassVar[bool] = False      # units are groups with an LR range, not grid cells
    part_of_grid: ClassVar[bool] = False  # runs a subset of the grid's cells

    # -- counting ------------------------------------------------------------------------------
    def bounds(self, plan: Plan) -> tuple[int, int]:
        """The least and the most trials the whole plan runs from an empty store."""
        raise NotImplementedError

    # -- planning ------------------------------------------------------------------------------
    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """What is left to run given the store's finished trials (a pure function of them)."""
        raise NotImplementedError

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Play `work` to its end without Ray, two trials at a time, `oracle` giving each
        trial's row: the rows of every trial it ran, in the order they finished (what the
        contract tests and benchmarks/search_cost.py replay)."""
        raise NotImplementedError

    # -- running -------------------------------------------------------------------------------
    def tune_setup(self, plan: Plan, work: Work, progress: Progress | None) -> TuneSetup:
        """The searcher, parameter space and scheduler Tune runs `work` with."""
        raise NotImplementedError

    def stop_contexts(self, plan: Plan) -> dict[str, Any]:
        """Per trial id, what its worker needs to stop it early (`search.stop`; none: {})."""
        stop = plan.spec.search.stop
        if stop is None:
            return {}
        from mutransfer.sweep.search.stopping import stop_contexts

        return stop_contexts(plan.cells, stop.protect_octaves, stop.safety)

    # -- telling -------------------------------------------------------------------------------
    def summary(self, plan: Plan, work: Work) -> str:
        """The run's and `validate`'s description of what it runs (no store location)."""
        raise NotImplementedError

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        """The table `--dry-run` prints: what ran and what is left."""
        raise NotImplementedError
