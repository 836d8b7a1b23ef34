"""Search strategies behind one seam: a registry keyed by `search.kind`.

`strategy_for(kind)` answers what the sweep asks (counts, the work left, Tune's searcher, the
dry-run listing); the protocol is mutransfer/sweep/search/base.py, one module per strategy.
Adding a strategy: docs/search-strategies.md.
"""

from __future__ import annotations

from mutransfer.sweep.search.base import SearchStrategy, TuneSetup, Work
from mutransfer.sweep.search.grid import GridSearch
from mutransfer.sweep.search.optuna_search import OptunaStrategy
from mutransfer.sweep.search.transfer import TransferStrategy

REGISTRY: dict[str, type[SearchStrategy]] = {
    s.kind: s for s in (GridSearch, OptunaStrategy, TransferStrategy)}

__all__ = ["REGISTRY", "SearchStrategy", "TuneSetup", "Work", "strategy_for"]


def strategy_for(kind: str) -> SearchStrategy:
    """The strategy of a `search.kind` (the spec's schema has already refused unknown kinds)."""
    return REGISTRY[kind]()
