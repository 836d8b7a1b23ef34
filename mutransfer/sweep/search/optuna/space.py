"""Each group's Optuna study: its space (log LR over the group's range) and its TPE sampler,
the same for the live searcher (studies.py) and the offline replay (strategy.py)."""

from __future__ import annotations

from typing import Any

from mutransfer.sweep.plan.cells import Group
from mutransfer.sweep.search.base import Work


def space_of(g: Group) -> dict[str, Any]:
    import optuna  # here, not at the top: 0.3 s that validate and --dry-run never need

    return {"lr": optuna.distributions.FloatDistribution(2.0 ** g.log2_lo, 2.0 ** g.log2_hi,
                                                         log=True)}


def sampler_for(seed: int, g: Group, work: Work) -> Any:
    """The group's TPE sampler: seeded by the sweep's seed and the group's id."""
    import optuna

    budget = work.budgets[g.group_id]
    warm = work.warm.get(g.group_id, [])
    return optuna.samplers.TPESampler(seed=seed + int(g.group_id[:8], 16),
                                      n_startup_trials=max(3, (budget + len(warm)) // 4))
