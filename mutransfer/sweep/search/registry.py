"""Every search strategy by its `search.kind`: what the sweep asks instead of branching on it.
Adding a strategy: its module or folder, one entry here, and its kind in
mutransfer/sweep/plan/spec.py `KINDS` (docs/search-strategies.md)."""

from __future__ import annotations

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Plan
from mutransfer.sweep.search.base import SearchStrategy, Work
from mutransfer.sweep.search.grid import GridSearch
from mutransfer.sweep.search.optuna.strategy import OptunaStrategy
from mutransfer.sweep.search.transfer.strategy import TransferStrategy

REGISTRY: dict[str, type[SearchStrategy]] = {
    s.kind: s for s in (GridSearch, OptunaStrategy, TransferStrategy)}


def strategy_for(kind: str) -> SearchStrategy:
    """The strategy of a `search.kind` (the spec's schema has already refused unknown kinds)."""
    return REGISTRY[kind]()


def plan_work(plan: Plan, state: StoreState) -> Work:
    """What is left to run: the strategy's answer for the store's finished trials."""
    return strategy_for(plan.spec.search.kind).plan_work(plan, state)
