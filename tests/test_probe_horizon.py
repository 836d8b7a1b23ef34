"""Horizon branching under unusual horizons and interrupted trunks: a trunk that starts at one
of its branch steps (killed between its eval checkpoint and the branch point, or continuing a
stable end that lies at a shorter cell's cooldown start) still writes the states due there; a
cell its trunk marks diverged has the row a separate run gives; the dry run says where each
length really starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.results.checkpoints import TrialCheckpoint
from mutransfer.results.store import Store, StoreState, read_tables
from mutransfer.sweep.plan.horizon import (
    describe,
    families,
    load_state,
    point_path,
    roles,
    stable_end_path,
)
from mutransfer.sweep.run import horizon as run_horizon
from mutransfer.sweep.run.horizon import HorizonCheckpoint
from tests.test_horizon import horizon_doc, plan_of, run_cells, separate


def by_steps(plan, steps: int):
    return next(c for c in plan.cells if c.config["train"]["steps"] == steps)


def save(path: str, state: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)


def checkpointer(store: Store, plan, cell) -> HorizonCheckpoint:
    role = roles(plan, {c.trial_id for c in plan.cells})[cell.trial_id]
    return HorizonCheckpoint(store, cell.trial_id, cell.config, role, max_overhead=None)


def config_text(cell) -> str:
    return TrialConfig.model_validate(cell.config).model_dump_json()


# -- a trunk that starts at a branch step ------------------------------------------------------
def test_a_trunk_resuming_at_a_branch_step_writes_the_branch_point_it_had_not_saved(tmp_path):
    # killed after its eval checkpoint at step 4, before the 8-step cell's point at step 4
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 16], eval_every=4))
    trunk, short = by_steps(plan, 16), by_steps(plan, 8)
    TrialCheckpoint(store, trunk.trial_id).save({"step": 4, "config": config_text(trunk)})
    state = checkpointer(store, plan, trunk).load()
    assert state is not None and state["step"] == 4
    point = load_state(store, point_path(store, short.trial_id))
    assert point is not None and point["step"] == 4
    assert point["horizon"] == {"from": trunk.trial_id, "step": 4}


def test_a_trunk_resuming_at_its_own_cooldown_start_writes_the_stable_end(tmp_path):
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 16], eval_every=4))
    trunk = by_steps(plan, 16)
    TrialCheckpoint(store, trunk.trial_id).save({"step": 8, "config": config_text(trunk)})
    checkpointer(store, plan, trunk).load()
    end = load_state(store, stable_end_path(store, families(plan)[0].family_id))
    assert end is not None and end["step"] == 8


def test_a_trunk_continuing_a_stable_end_at_a_shorter_cooldown_start_saves_that_point(tmp_path):
    # stored 4 and 8 steps (stable end at step 4); 9 steps (cooldown from 4) and 16 added
    root = tmp_path / "r"
    store = Store(root)
    plan = plan_of(horizon_doc(root, [9, 16]))
    trunk, nine = by_steps(plan, 16), by_steps(plan, 9)
    fam = families(plan)[0].family_id
    save(stable_end_path(store, fam), {"step": 4, "config": "the old trunk's",
                                       "horizon": {"from": "oldtrunk", "step": 4}})
    state = checkpointer(store, plan, trunk).load()
    assert state is not None and state["step"] == 4
    point = load_state(store, point_path(store, nine.trial_id))
    assert point is not None and point["step"] == 4
    assert point["horizon"] == {"from": "oldtrunk", "step": 4}  # the run that computed it
    assert load_state(store, stable_end_path(store, fam))["step"] == 4  # not its own start


def test_a_foreign_own_checkpoint_is_not_copied_into_branch_points(tmp_path):
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 16], eval_every=4))
    trunk, short = by_steps(plan, 16), by_steps(plan, 8)
    TrialCheckpoint(store, trunk.trial_id).save({"step": 4, "config": "another trial's"})
    with pytest.warns(UserWarning, match="another trial config"):
        assert checkpointer(store, plan, trunk).load() is None
    assert not Path(point_path(store, short.trial_id)).exists()


def test_a_foreign_own_checkpoint_does_not_hide_the_branch_point(tmp_path):
    # e.g. left by an earlier release whose config text lacked a later field
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 16], eval_every=4))
    short = by_steps(plan, 8)
    TrialCheckpoint(store, short.trial_id).save({"step": 6, "config": "another trial's"})
    save(point_path(store, short.trial_id), {"step": 4, "config": "the trunk's",
                                             "horizon": {"from": "trunk", "step": 4}})
    with pytest.warns(UserWarning, match="another trial config"):
        state = checkpointer(store, plan, short).load()
    assert state["step"] == 4 and state["config"] == config_text(short)


def test_a_truncated_own_checkpoint_falls_back_to_the_branch_point(tmp_path):
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 16], eval_every=4))
    short = by_steps(plan, 8)
    own = TrialCheckpoint(store, short.trial_id)
    own.save({"step": 6, "config": config_text(short), "model": torch.zeros(1000)})
    data = Path(own.path).read_bytes()
    Path(own.path).write_bytes(data[: len(data) // 2])
    save(point_path(store, short.trial_id), {"step": 4, "horizon": {"from": "t", "step": 4}})
    with pytest.warns(UserWarning, match="unreadable"):
        state = checkpointer(store, plan, short).load()
    assert state["step"] == 4


class Kill(Exception):
    pass


@pytest.mark.slow  # seconds: three short trainings
def test_a_trunk_killed_before_writing_a_branch_point_still_branches_that_cell(tmp_path,
                                                                              monkeypatch):
    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [8, 16], eval_every=4))
    trunk, short = by_steps(plan, 16), by_steps(plan, 8)

    def killed(self, step, state):
        raise Kill

    with monkeypatch.context() as m:
        m.setattr(run_horizon.HorizonCheckpoint, "save_branch", killed)
        with pytest.raises(Kill):  # at step 4: its eval checkpoint written, the point not
            run_cells(plan, root, order=[trunk])
    metrics = run_cells(plan, root)
    assert metrics[trunk.trial_id]["resumed_from"] == 4
    assert metrics[short.trial_id]["resumed_from"] == 4  # not a rerun from step 0
    rows = read_tables(root).trials.set_index("trial_id")
    assert rows.loc[short.trial_id, "branched_from"] == trunk.trial_id
    assert rows.loc[short.trial_id, "final_eval_loss"] == separate(short).final_eval_loss


# -- a cell its trunk marks diverged -----------------------------------------------------------
def test_a_cell_marked_diverged_by_its_trunk_has_the_spike_columns_of_a_separate_run(tmp_path):
    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [8, 16], lr=50.0, grad_clip=None, diverge_rule="patience",
                               diverge_patience=1, diverge_smoothing=0.0, diverge_delta=0.01))
    run_cells(plan, root)
    row = read_tables(root).trials.set_index("trial_id").loc[by_steps(plan, 8).trial_id]
    ref = separate(by_steps(plan, 8))
    assert row["status"] == "diverged" and row["wall_time_s"] == 0.0  # copied, not trained
    assert row["max_excursion"] == ref.max_excursion
    assert row["steps_above_bound"] == ref.steps_above_bound


# -- the dry run -------------------------------------------------------------------------------
def dry_run(plan, store: Store, complete=()) -> list[str]:
    return describe(plan, StoreState(complete={t: {} for t in complete}), store)


def test_dry_run_names_the_stored_point_a_trunk_starts_from(tmp_path):
    # a 16-step trunk saved the 8-step cell's point, then 16 was taken out of the file
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [4, 8]))
    save(point_path(store, by_steps(plan, 8).trial_id), {"step": 4})
    lines = dry_run(plan, store)
    assert any("8 steps" in x and "trunk, branches from the stored branch point at step 4" in x
               for x in lines), lines
    # the trunk starts at step 4, past the 4-step cell's cooldown start (step 2)
    assert any("4 steps" in x and "reruns from step 0" in x for x in lines), lines


def test_dry_run_says_a_branch_the_trunk_passes_branches_from_the_trunk(tmp_path):
    # stored 4 and 8 (stable end at step 4); 12 (cooldown from 6) and 16 added: the trunk
    # continues from step 4 and passes step 6, where the 12-step cell branches
    store = Store(tmp_path / "r")
    plan = plan_of(horizon_doc(tmp_path / "r", [4, 8, 12, 16]))
    save(stable_end_path(store, families(plan)[0].family_id), {"step": 4})
    lines = dry_run(plan, store, [by_steps(plan, s).trial_id for s in (4, 8)])
    assert any("16 steps" in x and "trunk, continues the family's saved state at step 4" in x
               for x in lines), lines
    assert any("12 steps" in x and "branches from the trunk at step 6 (this run)" in x
               for x in lines), lines

