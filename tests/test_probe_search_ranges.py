"""What the optuna search and the early-stopping rule read from a sweep's grid and trials,
at the grid's ends: an LR range's own end LR (2^log2(lr) is not always lr), and a run whose
length `train.tokens` sets. No Ray."""

from __future__ import annotations

import math

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Cell, build_plan
from mutransfer.sweep.plan.identity import canonical_json
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.search.optuna.strategy import at_lr
from mutransfer.sweep.search.registry import strategy_for

LRS = [0.0001, 0.001, 0.01]  # 2.0 ** math.log2(0.0001) == 1.0000000000000005e-4


def spec(kind: str, train: dict | None = None, **search) -> SweepSpec:
    return SweepSpec.model_validate({
        "name": "edges", "model": {"arch": "mamba", "n_layer": 1, "d_state": 4, "base_width": 16},
        "train": {"batch_size": 2, "seq_len": 16, "eval_every": 5,
                  **(train or {"steps": 10})},
        "data": {"source": "synthetic"},
        "axes": {"width": [16, 32], "lr": LRS, "seed": [0]},
        "search": {"kind": kind, **search}})


def row(cell: Cell, loss: float) -> dict:
    return {"trial_id": cell.trial_id, "status": "complete", "diverged": False,
            "final_eval_loss": loss, "initial_loss": 6.0, "search": "grid",
            "lr": float(cell.columns["lr"]), "width": cell.width,
            "config": canonical_json(cell.config)}


def test_optuna_warm_starts_from_every_stored_trial_of_its_range_including_its_ends():
    assert 2.0 ** math.log2(LRS[0]) != LRS[0]
    grid = build_plan(spec("grid"))
    stored = {c.trial_id: row(c, 3.0 + i) for i, c in enumerate(grid.cells)}
    plan = build_plan(spec("optuna", trials_per_width=4))
    strategy = strategy_for("optuna")
    work = strategy.plan_work(plan, StoreState(complete=stored))
    for g in plan.groups:
        warm = work.warm[g.group_id]
        assert len(warm) == len(LRS), warm  # the grid's three LRs, its lowest too
        lo, hi = 2.0 ** g.log2_lo, 2.0 ** g.log2_hi
        assert all(lo <= lr <= hi for lr, _ in warm)  # inside the study's space

    # and the study takes them: the replay asks for the rest of the budget
    def oracle(cell: Cell) -> dict:
        return row(cell, 3.0 + (math.log2(cell.columns["lr"]) + 10.0) ** 2 / 100)

    ran = strategy.offline(plan, work, oracle)
    assert len(ran) == sum(work.budgets.values())


def test_early_stopping_reads_curves_up_to_the_step_a_token_budget_ends_at():
    # train.tokens sets the run's length (640 tokens of 2 x 16: 20 steps); train.steps keeps
    # its default 200, which no curve reaches: a context ending there never sees a complete
    # curve, and nothing would ever be stopped
    for train in ({"tokens": 640}, {"steps": None, "tokens": 640}):
        plan = build_plan(spec("grid", train=train, stop={}))
        contexts = strategy_for("grid").stop_contexts(plan)
        assert contexts and {ctx.final_step for ctx in contexts.values()} == {20}, train
    plan = build_plan(spec("transfer", train={"steps": 12}, stop={}))
    assert {c.final_step for c in strategy_for("transfer").stop_contexts(plan).values()} == {12}


def test_an_optuna_range_narrowed_since_gets_its_budget_inside_the_new_range():
    """Three stored optuna trials a width, one inside the narrowed range [0.005, 0.02]:
    the group runs 4 - 1 more (before: 4 - 3, the trials outside the range used it up)."""
    wide = build_plan(spec("optuna", trials_per_width=4))
    stored = {}
    for g in wide.groups:
        for i, lr in enumerate(LRS):
            c = at_lr(g, lr)
            stored[c.trial_id] = {**row(c, 3.0 + i), "search": "optuna"}
    narrow = spec("optuna", trials_per_width=4)
    narrow.axes["lr"] = [0.005, 0.02]
    plan = build_plan(narrow)
    work = strategy_for("optuna").plan_work(plan, StoreState(complete=stored))
    assert {g.group_id for g in plan.groups} == {g.group_id for g in wide.groups}
    assert [work.budgets[g.group_id] for g in plan.groups] == [3, 3]
