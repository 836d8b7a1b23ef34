"""Each group's Optuna study: its space (log LR over the group's range) and its TPE sampler,
the same for the live searcher (studies.py) and the offline replay (strategy.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from mutransfer.sweep.plan.cells import Group
from mutransfer.sweep.search.base import Work

# numpy's RandomState (Optuna's samplers) takes seeds in [0, 2^32)
SEEDS = 2 ** 32


def space_of(g: Group) -> dict[str, Any]:
    import optuna  # here, not at the top: 0.3 s that validate and --dry-run never need

    return {"lr": optuna.distributions.FloatDistribution(2.0 ** g.log2_lo, 2.0 ** g.log2_hi,
                                                         log=True)}


def sampler_for(seed: int, g: Group, work: Work) -> Any:
    """The group's TPE sampler: seeded by the sweep's seed, the group's id and the stored
    trials it starts from (`sampler_seed`)."""
    import optuna

    budget = work.budgets[g.group_id]
    warm = work.warm.get(g.group_id, [])
    return optuna.samplers.TPESampler(seed=sampler_seed(seed, g.group_id, warm),
                                      n_startup_trials=max(3, (budget + len(warm)) // 4))


def sampler_seed(seed: int, group: str, warm: list[tuple[float, float]]) -> int:
    """`seed` plus the group id's first 32 bits, and for a study resumed from stored trials
    a hash of their LRs: a resumed study seeded as the first run's drew that run's LRs again
    (the sampler's stream starts over), each found its stored trial and ran nothing, and the
    study ended short of its budget. Keyed by the stored LRs (sorted: the store's order is
    no part of it), the same store resumes the same way. Modulo 2^32: any `search.seed`
    (numpy refused a seed past 2^32 - 1 or below 0 with a traceback); a fresh study's seed
    is the one it always had."""
    base = seed + int(group[:8], 16)
    if warm:
        lrs = ",".join(repr(lr) for lr in sorted(lr for lr, _ in warm))
        base += int(hashlib.sha256(lrs.encode()).hexdigest()[:8], 16)
    return base % SEEDS
