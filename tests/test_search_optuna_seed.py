"""The samplers of an Optuna search: any `search.seed` the sweep file takes gives one (numpy
takes seeds in [0, 2^32)), and a fresh study's seed is the one earlier releases gave (its LRs,
and so its trial ids, are those of tests/fixtures/old_store/old-optuna). No Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mutransfer.results.store import Store, StoreState
from mutransfer.sweep.plan.cells import Cell, build_plan
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.registry import strategy_for

OLD = Path(__file__).parent / "fixtures" / "old_store"


def plan_of(doc: dict[str, Any]):
    return build_plan(SweepSpec.model_validate(doc))


def lr_row(cell: Cell) -> dict[str, Any]:
    return {"trial_id": cell.trial_id, "final_eval_loss": 3.0, "lr": cell.columns["lr"]}


@pytest.mark.parametrize("seed", [2 ** 32, 2 ** 40 + 3, -5, -(2 ** 33)])
def test_any_search_seed_the_sweep_file_takes_gives_each_study_a_sampler(seed):
    # before: numpy refused seed + the group's 32 bits outside [0, 2^32) in the sweep's first
    # suggest, a traceback after validate had said ok
    doc = yaml.safe_load((OLD / "old-optuna.yaml").read_text())
    doc["search"]["seed"] = seed
    plan = plan_of(doc)
    strategy = strategy_for("optuna")
    rows = strategy.offline(plan, strategy.plan_work(plan, StoreState()), lr_row)
    (g,) = plan.groups
    assert len(rows) == 2
    assert all(2.0 ** g.log2_lo <= r["lr"] <= 2.0 ** g.log2_hi for r in rows)


def test_a_fresh_study_proposes_the_lrs_it_proposed_in_earlier_releases():
    doc = yaml.safe_load((OLD / "old-optuna.yaml").read_text())
    stored = Store(str(OLD / "old-optuna")).scan(repair=False).complete
    plan = plan_of(doc)
    strategy = strategy_for("optuna")

    def stored_row(cell: Cell) -> dict[str, Any]:
        return stored.get(cell.trial_id) or lr_row(cell)

    rows = strategy.offline(plan, strategy.plan_work(plan, StoreState()), stored_row)
    assert {r["trial_id"] for r in rows} == set(stored) and len(stored) == 2
