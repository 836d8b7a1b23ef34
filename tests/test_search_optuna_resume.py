"""A resumed Optuna study (a sweep stopped midway, run again): the store's trials warm-start
it, and it runs the rest of its budget at new LRs, deterministically. No Ray: the offline
replay uses the samplers and spaces the live searcher does (optuna/space.py)."""

from __future__ import annotations

import math
from typing import Any

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, build_plan
from mutransfer.sweep.plan.identity import canonical_json
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.registry import strategy_for

BUDGET = 6


def spec(seed: int = 0, budget: int = BUDGET) -> SweepSpec:
    return SweepSpec.model_validate({
        "name": "resume", "model": {"arch": "mamba", "n_layer": 1, "d_state": 4,
                                    "base_width": 16},
        "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
        "data": {"source": "synthetic"},
        "axes": {"width": [16], "parameterization": ["sp", "mup"],
                 "lr": {"sp": {"log2": [-10, -6]}, "mup": {"log2": [-8, -3]}}, "seed": [0, 1]},
        "search": {"kind": "optuna", "trials_per_width": budget, "max_concurrent": 1,
                   "seed": seed}})


def oracle(cell: Cell) -> dict[str, Any]:
    """A bowl in log2 LR around 2^-6: the row the trial would store."""
    lr = float(cell.columns["lr"])
    return {"trial_id": cell.trial_id, "status": "complete", "diverged": False,
            "final_eval_loss": 3.0 + 0.05 * (math.log2(lr) + 6) ** 2, "initial_loss": 6.0,
            "search": "optuna", "lr": lr, "width": cell.width,
            "config": canonical_json(cell.config)}


def replay(rows: list[dict[str, Any]], seed: int = 0,
           budget: int = BUDGET) -> list[dict[str, Any]]:
    """The rows a run from a store holding `rows` adds."""
    plan = build_plan(spec(seed, budget))
    strategy = strategy_for("optuna")
    work = strategy.plan_work(plan, StoreState(complete={r["trial_id"]: r for r in rows}))
    return strategy.offline(plan, work, oracle)


def stopped_after(k: int, budget: int = BUDGET) -> list[dict[str, Any]]:
    """The store of a sweep stopped after each study's first `k` trials."""
    whole = replay([], budget=budget)
    per_group: dict[str, list[dict[str, Any]]] = {}
    for r in whole:  # offline: each study's trials in the order they ran
        per_group.setdefault(r["config"].replace(f'"lr":{r["lr"]!r}', ""), []).append(r)
    assert len(per_group) == 4 and all(len(v) == budget for v in per_group.values())
    return [r for rows in per_group.values() for r in rows[:k]]


def test_a_study_resumed_midway_runs_the_rest_of_its_budget_at_lrs_the_store_does_not_hold():
    # stopped during the random start-up trials (before: the resumed sampler, seeded as the
    # first run's, proposed that run's first LRs again; each such trial found the stored one,
    # ran nothing, and the study ended short of trials_per_width)
    for k in (1, 2, 4):
        part = stopped_after(k)
        rest = replay(part)
        assert len(rest) == 4 * (BUDGET - k)
        ids = [r["trial_id"] for r in part + rest]
        assert len(set(ids)) == len(ids) == 4 * BUDGET, k  # none repeated: none lost
        assert replay(part + rest) == []  # and the run after it has nothing left


def test_a_resumed_study_proposes_the_same_lrs_from_the_same_store_whatever_its_order():
    # 11 of 12 (trials_per_width's default) stored: TPE's good trials are two, and it drew
    # from them in the order the study was told them (before: the order of the store's rows)
    for k, budget in ((2, BUDGET), (11, 12)):
        part = stopped_after(k, budget)
        first = [r["trial_id"] for r in replay(part, budget=budget)]
        assert first == [r["trial_id"] for r in replay(list(reversed(part)), budget=budget)]
        assert first != [r["trial_id"] for r in replay(part, seed=1, budget=budget)]
