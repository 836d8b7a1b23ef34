"""The search-strategy seam: what the sweep asks a strategy instead of branching on its kind.

A strategy decides which trials a sweep runs. It is a pure function of the plan and of the
finished outcomes in the store (no Ray, no I/O) up to `tune_setup`, which builds what Ray
Tune needs to run its work. Every registered strategy passes tests/test_search_contract.py:
replaying a store gives the same plan, a new width runs only what it must, its counts bracket
what runs, and a finished store runs nothing. docs/search-strategies.md says how to add one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from mutransfer.sweep.plan.cells import Cell, Group, Plan
from mutransfer.sweep.search.stopping import stop_contexts

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState

# a trial's outcome offline: the trials-table row a unit (a cell, or a group at an LR) gives
Oracle = Callable[[Cell], dict[str, Any]]


class Deciding(Protocol):
    """The state of a strategy that decides as it goes (`search.kind`'s `part_of_grid`):
    what the runner asks of it. The strategy owns it and is the only one to look inside."""

    def to_run(self) -> list[str]:
        """Trial ids it wants started now."""

    def started_count(self) -> int:
        """Trials started in this run: finished, failed or still running."""


class Reports(Protocol):
    """Where a strategy reports as it decides (the sweep's progress line, run/progress.py)."""

    expected: int  # trials known so far to be needed (shown as ~N where no total is known)

    def message(self, line: str) -> None:
        """A line for the sweep's log."""


@dataclass
class Work:
    """What this run executes: grid cells, or adaptive groups with their remaining budget."""

    cells: list[Cell] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    budgets: dict[str, int] = field(default_factory=dict)  # group id -> trials still to run
    warm: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # (lr, objective)
    state: Deciding | None = None  # a strategy that decides as it goes: its state
    horizon: dict[str, dict[str, Any]] = field(default_factory=dict)  # trial id -> its role

    @property
    def n_trials(self) -> int:
        """Trials to run; for a strategy that decides as it goes, those it asks for now."""
        if self.state is not None:
            return len(self.state.to_run())
        return len(self.cells) + sum(self.budgets.values())


@dataclass
class TuneSetup:
    """What a strategy gives Ray Tune: a searcher (None: a grid search over `param_space`),
    the parameter space, how many samples, and a scheduler (None: FIFO)."""

    search_alg: Any = None
    param_space: dict[str, Any] = field(default_factory=dict)
    num_samples: int = 1
    scheduler: Any = None


class SearchStrategy(ABC):
    """One way of searching the LR axis (`search.kind`). Subclasses set `kind` and implement
    every abstract method (a class missing one cannot be instantiated). What units it runs
    (adaptive groups, or a part of the grid's cells) is its kind's entry in
    mutransfer/sweep/plan/spec.py `KINDS`."""

    kind: ClassVar[str] = ""

    # -- counting ------------------------------------------------------------------------------
    @abstractmethod
    def bounds(self, plan: Plan) -> tuple[int, int]:
        """The least and the most trials the whole plan runs from an empty store."""

    # -- planning ------------------------------------------------------------------------------
    @abstractmethod
    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """What is left to run given the store's finished trials (a pure function of them)."""

    @abstractmethod
    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Play `work` to its end without Ray, as the strategy runs trials side by side (the
        grid and the transfer search two at a time, an Optuna study one), `oracle` giving each
        trial's row: the rows of every trial it ran, in the order they finished (what the
        contract tests and benchmarks/search_cost.py replay)."""

    # -- running -------------------------------------------------------------------------------
    @abstractmethod
    def tune_setup(self, plan: Plan, work: Work, progress: Reports | None) -> TuneSetup:
        """The searcher, parameter space and scheduler Tune runs `work` with."""

    def stop_contexts(self, plan: Plan) -> dict[str, Any]:
        """Per trial id, what its worker needs to stop it early (`search.stop`; none: {})."""
        stop = plan.spec.search.stop
        if stop is None:
            return {}
        return stop_contexts(plan.cells, stop.protect_octaves, stop.safety)

    # -- telling -------------------------------------------------------------------------------
    @abstractmethod
    def summary(self, plan: Plan, work: Work) -> str:
        """The run's and `validate`'s description of what it runs (no store location)."""

    @abstractmethod
    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        """The table `--dry-run` prints: what ran and what is left."""
