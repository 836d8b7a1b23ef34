"""The contract every search strategy (mutransfer/sweep/search/) passes, on planted outcomes:
resumable (replaying a store gives the same plan), extendable (a new width runs only what it
must), counts that bracket what runs, and a finished store that runs nothing. No Ray."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, build_plan
from mutransfer.sweep.plan.identity import canonical_json
from mutransfer.sweep.plan.spec import KINDS as SPEC_KINDS
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.registry import REGISTRY, strategy_for

KINDS = sorted(REGISTRY)
OPTIONS = {"optuna": {"trials_per_width": 4}}


def spec(kind: str, widths=(16, 32), **search: Any) -> SweepSpec:
    return SweepSpec.model_validate({
        "name": "contract",
        "model": {"arch": "mamba", "n_layer": 1, "d_state": 4, "base_width": 16},
        "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
        "data": {"source": "synthetic"},
        "axes": {"width": list(widths), "parameterization": ["sp", "mup_ssm"],
                 "lr": {"log2": [-10, -3], "per_octave": 1}, "seed": [0, 1]},
        "search": {"kind": kind, **OPTIONS.get(kind, {}), **search}})


def oracle(kind: str):
    """A planted bowl in log2 LR (sp's optimum halves per doubling of width), diverged above
    the optimum + 3 octaves; the row a trial of `kind` would store."""
    def row(cell: Cell) -> dict[str, Any]:
        c = cell.columns
        x, w = math.log2(float(c["lr"])), int(c["width"])
        opt = -6.0 - (math.log2(w / 16) if c["parameterization"] == "sp" else 0.0)
        diverged = x > opt + 3
        noise = 0.002 * random.Random(f"{cell.trial_id}").random()
        loss = None if diverged else 3.0 + 0.05 * (x - opt) ** 2 + noise
        return {"trial_id": cell.trial_id, "status": "diverged" if diverged else "complete",
                "diverged": diverged, "final_eval_loss": loss, "search": kind,
                "lr": float(c["lr"]), "width": w, "config": canonical_json(cell.config)}
    return row


def state_of(rows: list[dict[str, Any]]) -> StoreState:
    return StoreState(complete={r["trial_id"]: r for r in rows})


def play(kind: str, widths=(16, 32), rows=(), **search: Any) -> tuple[list[dict], Any, Any]:
    """Run a strategy offline from a store holding `rows`: the rows it ran, plan, strategy."""
    plan = build_plan(spec(kind, widths, **search))
    strategy = strategy_for(kind)
    work = strategy.plan_work(plan, state_of(list(rows)))
    return strategy.offline(plan, work, oracle(kind)), plan, strategy


def describe(work) -> tuple:
    """What a plan asks for, comparable between two replays."""
    to_run = sorted(work.state.to_run()) if work.state is not None else []
    return (sorted(c.trial_id for c in work.cells), sorted(work.budgets.items()), to_run,
            sorted((g, sorted(w)) for g, w in work.warm.items()))


@pytest.mark.parametrize("kind", KINDS)
def test_counts_bracket_what_runs(kind):
    ran, plan, strategy = play(kind)
    least, most = strategy.bounds(plan)
    assert 0 < least <= len(ran) <= most
    assert len({r["trial_id"] for r in ran}) == len(ran)  # nothing runs twice


@pytest.mark.parametrize("kind", KINDS)
def test_finished_store_runs_nothing(kind):
    ran, plan, strategy = play(kind)
    work = strategy.plan_work(plan, state_of(ran))
    assert work.n_trials == 0
    assert strategy.offline(plan, work, oracle(kind)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_replaying_a_store_gives_the_same_plan(kind):
    ran, plan, strategy = play(kind)
    part = ran[: len(ran) // 2]
    a = strategy.plan_work(plan, state_of(part))
    b = strategy.plan_work(plan, state_of(list(reversed(part))))  # store order is arbitrary
    assert describe(a) == describe(b)
    assert a.n_trials > 0
    rest = strategy.offline(plan, a, oracle(kind))
    assert not {r["trial_id"] for r in rest} & {r["trial_id"] for r in part}
    assert len(part) + len(rest) == len(ran)  # a resumed search runs what the whole one did
    if not SPEC_KINDS[strategy.kind].adaptive:  # the same cells, not only as many (a
        # sampler's LRs may differ)
        assert {r["trial_id"] for r in part + rest} == {r["trial_id"] for r in ran}


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_width_runs_only_what_it_must(kind):
    ran, _, _ = play(kind, widths=(16, 32))
    more, plan, strategy = play(kind, widths=(16, 32, 64), rows=ran)
    assert more and {r["width"] for r in more} == {64}
    alone, _, _ = play(kind, widths=(16, 32, 64))
    assert len(more) + len(ran) == len(alone)  # as if the three widths had run at once


@pytest.mark.parametrize("kind", KINDS)
def test_every_strategy_describes_its_work(kind):
    plan = build_plan(spec(kind))
    strategy = strategy_for(kind)
    work = strategy.plan_work(plan, StoreState())
    assert strategy.summary(plan, work)
    assert "trial_id" in strategy.listing(plan, work, StoreState()) or \
        "family" in strategy.listing(plan, work, StoreState()) or \
        "group" in strategy.listing(plan, work, StoreState())
    assert strategy.kind == kind and json.dumps(kind)
