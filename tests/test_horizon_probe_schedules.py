"""LR schedules against formulas written from the references, not from optim.py, and the
trial ids of a horizon sweep when its set of lengths changes (docs/schedules.md).

cosine / linear: Karpathy's build-nanogpt `get_lr`: (i+1)/warmup during the warmup, then
p = (i - warmup)/(steps - warmup). wsd: Hägele et al. 2024: the peak LR after the warmup, then
a cooldown over the last `cooldown` fraction (rounded half up, at least one step), p = steps
into it / its length, shaped 1-p, (1+cos πp)/2 or 1-√p; min_lr_ratio + (1-min_lr_ratio)·decay.
"""

from __future__ import annotations

import math

import pytest

from mutransfer.config import TrainConfig
from mutransfer.optim import schedule_factor
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.horizon import roles
from mutransfer.sweep.plan.spec import SweepSpec
from tests.sweeps import tiny_sweep

SHAPES = {"linear": lambda p: 1 - p, "cosine": lambda p: 0.5 * (1 + math.cos(math.pi * p)),
          "sqrt": lambda p: 1 - math.sqrt(p)}


def reference(i: int, t: TrainConfig) -> float:
    """The multiplier at 0-based step i, from the references' formulas."""
    total, warmup, floor = t.total_steps, t.warmup, t.min_lr_ratio
    if i < warmup:
        return (i + 1) / warmup
    if t.schedule == "constant" or (t.schedule != "wsd" and total == warmup):
        return 1.0
    if t.schedule in ("cosine", "linear"):
        return floor + (1 - floor) * SHAPES[t.schedule]((i - warmup) / (total - warmup))
    cool = max(1, math.floor(t.cooldown * total + 0.5))
    if i < total - cool:
        return 1.0
    return floor + (1 - floor) * SHAPES[t.cooldown_shape]((i - (total - cool)) / cool)


def configs():
    """Every schedule and cooldown shape over the edge cases: one step, warmup 0 and warmup
    = steps (where the config allows it), cooldown of one step and of the whole run."""
    for steps in (1, 2, 5, 6, 20, 37):
        for warmup in sorted({0, 1, steps // 2, steps}):
            for schedule in ("constant", "cosine", "linear"):
                for floor in (0.0, 0.1):
                    yield TrainConfig(schedule=schedule, steps=steps, warmup=warmup,
                                      min_lr_ratio=floor)
            for cooldown in (0.05, 0.2, 0.5, 1.0):
                for shape in SHAPES:
                    if warmup + max(1, math.floor(cooldown * steps + 0.5)) <= steps:
                        yield TrainConfig(schedule="wsd", steps=steps, warmup=warmup,
                                          cooldown=cooldown, cooldown_shape=shape,
                                          min_lr_ratio=0.1)


def test_every_schedule_matches_the_reference_formulas_at_every_step():
    """Each step's multiplier is the reference's to rounding, and the stable phase of wsd is
    exactly 1.0 (what bit-identical horizon branches rely on)."""
    checked = 0
    for t in configs():
        for i in range(t.total_steps):
            want, got = reference(i, t), schedule_factor(t, i)
            assert got == pytest.approx(want, abs=1e-12), (t, i)
            if want == 1.0 and t.schedule == "wsd":
                assert got == 1.0, (t, i)
            checked += 1
    assert checked > 2000


def test_a_wsd_run_of_the_whole_run_as_cooldown_is_the_linear_schedule():
    """cooldown 1 with warmup 0 and a linear shape: p = i/steps, the linear schedule's."""
    wsd = TrainConfig(schedule="wsd", steps=12, cooldown=1.0, min_lr_ratio=0.2)
    linear = TrainConfig(schedule="linear", steps=12, min_lr_ratio=0.2)
    assert [schedule_factor(wsd, i) for i in range(12)] == \
        pytest.approx([schedule_factor(linear, i) for i in range(12)], abs=1e-15)


def plan_ids(lengths: list[int], **train) -> dict[int, str]:
    doc = tiny_sweep("h", {"train.steps": lengths}, storage="/nonexistent/h")
    doc["train"].update({"schedule": "wsd", "warmup": 1, "cooldown": 0.2, **train})
    plan = build_plan(SweepSpec.model_validate(doc))
    return {c.config["train"]["steps"]: c.trial_id for c in plan.cells}


def test_changing_the_set_of_lengths_keeps_the_trial_ids_of_the_others():
    """Adding or removing a length, or turning branching off, gives every other length the
    id it had: stored cells stay stored, and a branch is the same trial as a separate run."""
    full = plan_ids([10, 20, 40])
    assert plan_ids([10, 40]) == {k: full[k] for k in (10, 40)}
    more = plan_ids([5, 10, 20, 40, 80])
    assert {k: more[k] for k in full} == full
    assert plan_ids([10, 20, 40], branch=False) == full


def test_the_longest_pending_length_is_the_trunk_and_the_others_branch_at_their_cooldown():
    """Trunk: the longest cell still to run; each other cell branches at its own cooldown
    start, steps - round_half_up(0.2 · steps)."""
    doc = tiny_sweep("h", {"train.steps": [10, 21, 33, 40]}, storage="/nonexistent/h")
    doc["train"].update({"schedule": "wsd", "warmup": 1, "cooldown": 0.2})
    plan = build_plan(SweepSpec.model_validate(doc))
    ids = {c.config["train"]["steps"]: c.trial_id for c in plan.cells}
    role = roles(plan, set(ids.values()))
    assert role[ids[40]]["role"] == "trunk"
    assert role[ids[40]]["points"] == {ids[10]: 8, ids[21]: 17, ids[33]: 26}
    without_longest = roles(plan, {ids[10], ids[21], ids[33]})  # 40 stored already
    assert without_longest[ids[33]]["role"] == "trunk"
    assert without_longest[ids[10]]["trunk"] == ids[33]
