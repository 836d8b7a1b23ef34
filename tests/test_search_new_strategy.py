"""Adding a search strategy that decides as it goes takes 1 folder (its code) + 1 registry
entry + its kind in the spec (docs/search-strategies.md). tests/climb.py is such a strategy,
registered in exactly those two places; here it runs through the dry run and the offline
replay (tests/test_search_sweep.py runs it on Ray): nothing else of the sweep knows it. And the
seam is an abc.ABC: a strategy missing a method cannot be made."""

from __future__ import annotations

from typing import Any

import pytest

from mutransfer.errors import UserError
from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.run.driver import dry_run, prepare
from mutransfer.sweep.search.base import SearchStrategy
from mutransfer.sweep.search.registry import plan_work, strategy_for
from tests.climb import ClimbStrategy, register
from tests.sweeps import tiny_sweep

LRS = [0.0005, 0.002, 0.008, 0.032, 0.128]


@pytest.fixture
def climb_registered(monkeypatch):
    register(monkeypatch)


def doc(tmp_path) -> dict:
    return tiny_sweep("climb", {"width": [16, 32], "lr": LRS, "seed": [0]}, steps=4,
                      eval_every=2, storage=str(tmp_path / "results"),
                      search={"kind": "climb"})


def test_an_unregistered_kind_is_refused_in_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(UserError,
                       match="search.kind: Input should be 'grid', 'optuna' or 'transfer'"):
        prepare(doc(tmp_path), check_data=False)


def test_the_dry_run_shows_what_the_new_strategy_runs_first(tmp_path, climb_registered):
    out = dry_run(doc(tmp_path))
    assert "sweep climb: climb over 10 cells: at least 2; 0 stored, 2 to run now" in out
    assert out.count("runs now") == 2 and out.count("waits") == 8  # the lowest LR per width
    assert "a climb search runs a part of it" in out  # the cost table's title


def test_offline_the_new_strategy_climbs_until_the_loss_turns_and_resumes(tmp_path,
                                                                          climb_registered):
    plan = prepare(doc(tmp_path), check_data=False)
    strategy = strategy_for("climb")

    def oracle(cell: Cell) -> dict[str, Any]:  # a bowl with its bottom at LR 0.008
        lr = float(cell.columns["lr"])
        return {"trial_id": cell.trial_id, "final_eval_loss": abs(lr - 0.008)}

    ran = strategy.offline(plan, plan_work(plan, StoreState()), oracle)
    assert len(ran) == 10 - 2  # up to 0.032 (worse than 0.008) at each width, not 0.128
    part = {r["trial_id"]: r for r in ran[:3]}
    rest = strategy.offline(plan, plan_work(plan, StoreState(complete=part)), oracle)
    assert sorted(r["trial_id"] for r in [*ran[:3], *rest]) == sorted(r["trial_id"] for r in ran)


def test_a_strategy_missing_a_method_of_the_seam_cannot_be_made():
    class Half(SearchStrategy):  # bounds only: no plan_work, offline, tune_setup, ...
        kind = "half"

        def bounds(self, plan: Plan) -> tuple[int, int]:
            return 0, 0

    with pytest.raises(TypeError, match="abstract method.*listing"):
        Half()
    ClimbStrategy()  # every method there: it can
