"""Horizon branching (issue 21): the wsd schedule, weight decay modes, and the cells of a sweep
that differ only in length trained as one trunk with cooldown branches: bit-identical to
separate runs on CPU, resumable, diverging together, refused in one line when malformed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

from mutransfer.cli import main
from mutransfer.config import TrainConfig, TrialConfig
from mutransfer.configbase import cooldown_steps
from mutransfer.optim import lr_factor, make_optimizer
from mutransfer.param.config import ROLES
from mutransfer.results.schema import DECAY_ROLES
from mutransfer.results.store import Store, read_tables
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.horizon import families, point_path, roles, stable_end_path
from mutransfer.sweep.plan.identity import trial_id
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.run.trainable import TrialUnit, run_unit
from mutransfer.train import run_trial
from tests.sweeps import tiny_sweep

WSD = {"schedule": "wsd", "warmup": 1, "cooldown": 0.5, "eval_every": 3}


def horizon_doc(root: Path, lengths: list[int], **train) -> dict:
    doc = tiny_sweep("h", {"train.steps": lengths}, storage=str(root))
    doc["train"].update({**WSD, **train})
    return doc


def plan_of(doc: dict):
    return build_plan(SweepSpec.model_validate(doc))


def run_cells(plan, root: Path, order=None, on_eval=None) -> dict:
    """Run each pending cell as the sweep would (trunks first), without Ray."""
    store = Store(root)
    done = store.scan(repair=False).complete
    pending = {c.trial_id for c in plan.cells if c.trial_id not in done}
    role = roles(plan, pending)
    cells = sorted(plan.cells, key=lambda c: role.get(c.trial_id, {}).get("role") == "branch")
    out = {}
    for c in order or cells:
        unit = TrialUnit(c.config, c.columns, c.trial_id, "grid", None, role.get(c.trial_id))
        out[c.trial_id] = run_unit(unit, str(root), "h", save_every_eval=True, on_eval=on_eval)
    return out


def separate(cell) -> object:
    return run_trial(TrialConfig.model_validate(cell.config))


# -- the schedule --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,mid", [("linear", 0.5), ("cosine", 0.5),
                                       ("sqrt", 1 - math.sqrt(0.5))])
def test_wsd_warms_up_holds_then_cools_down_along_its_shape(shape, mid):
    f = [lr_factor(i, 100, 10, "wsd", 0.0, 0.2, shape) for i in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == 1.0
    assert all(x == 1.0 for x in f[10:80])  # exactly: lengths share the stable phase bit for bit
    assert f[80] == 1.0 and f[90] == pytest.approx(mid)
    assert all(a >= b for a, b in zip(f[80:], f[81:])) and f[99] < 0.2


def test_wsd_cools_down_to_min_lr_ratio():
    assert lr_factor(99, 100, 0, "wsd", 0.1, 0.2, "linear") == pytest.approx(0.1 + 0.9 / 20)
    assert TrainConfig(schedule="wsd", steps=250).cooldown_start == 200
    assert TrainConfig(schedule="cosine", steps=250).cooldown_start == 250


def test_lengths_share_the_stable_phase_exactly():
    for steps in (100, 200, 400):
        assert [lr_factor(i, steps, 5, "wsd", 0.0) for i in range(80)] == \
            [lr_factor(i, 400, 5, "wsd", 0.0) for i in range(80)]


# -- weight decay modes --------------------------------------------------------------------------
def _opt(mode: str, lr: float):
    from mutransfer.data import load_data
    from mutransfer.models.build import build_model

    cfg = TrialConfig.model_validate(
        {"width": 32, "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
         "param": {"name": "mup_ssm"},
         "train": {"lr": lr, "weight_decay": 0.1, "weight_decay_mode": mode}})
    model = build_model(cfg, load_data(cfg.data).spec)
    return make_optimizer(model, cfg)


def test_independent_weight_decay_does_not_move_with_the_lr():
    """Independent: the decay per step is coupled mode's over the base LR, at every LR."""
    per_step = {}
    for lr in (1e-3, 1e-2):
        coupled, independent = _opt("coupled", lr), _opt("independent", lr)
        for c, i in zip(coupled.param_groups, independent.param_groups):
            assert i["lr"] * i["weight_decay"] == pytest.approx(c["lr"] * c["weight_decay"] / lr)
        per_step[lr] = [g["lr"] * g["weight_decay"] for g in independent.param_groups]
    assert per_step[1e-3] == pytest.approx(per_step[1e-2])
    small, big = _opt("coupled", 1e-3), _opt("coupled", 1e-2)
    hidden = [g for g in small.param_groups if g["role"] == "hidden"][0]
    hidden_big = [g for g in big.param_groups if g["role"] == "hidden"][0]
    assert hidden_big["lr"] * hidden_big["weight_decay"] == \
        pytest.approx(10 * hidden["lr"] * hidden["weight_decay"])


def test_the_decay_roles_of_the_schema_are_the_parameter_roles():
    assert tuple(DECAY_ROLES) == tuple(ROLES)


# -- identity and families -----------------------------------------------------------------------
def test_branch_is_not_part_of_the_trial_id(tmp_path):
    a = TrialConfig.model_validate({"train": {"schedule": "wsd", "branch": False}})
    b = TrialConfig.model_validate({"train": {"schedule": "wsd"}})
    assert trial_id(a) == trial_id(b)


def test_families_group_lengths_and_branch_false_runs_them_separately(tmp_path):
    plan = plan_of(horizon_doc(tmp_path / "r", [8, 4, 16]))
    (fam,) = families(plan)
    assert [c.config["train"]["steps"] for c in fam.cells] == [16, 8, 4]
    role = roles(plan, {c.trial_id for c in plan.cells})
    assert sorted(r["role"] for r in role.values()) == ["branch", "branch", "trunk"]
    assert not families(plan_of(horizon_doc(tmp_path / "r", [8, 4], branch=False)))
    assert not families(plan_of(horizon_doc(tmp_path / "r", [8, 4], schedule="cosine")))


# -- bit identity, resume, divergence ------------------------------------------------------------
@pytest.mark.slow  # seconds on an idle machine: four short trainings
def test_branched_cells_equal_separate_runs_bit_for_bit(tmp_path):
    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [4, 8, 16], weight_decay=0.1))
    metrics = run_cells(plan, root)
    tables = read_tables(root)
    rows = tables.trials.set_index("trial_id")
    trunk = max(plan.cells, key=lambda c: c.config["train"]["steps"])
    for cell in plan.cells:
        ref = separate(cell)
        row = rows.loc[cell.trial_id]
        assert row["final_eval_loss"] == ref.final_eval_loss  # bit for bit
        steps = tables.steps[tables.steps.trial_id == cell.trial_id]
        assert steps["eval_loss"].tolist() == [h["eval_loss"] for h in ref.history]
        assert steps["train_loss"].tolist()[1:] == [h["train_loss"] for h in ref.history][1:]
        assert row["planned_tokens"] == cell.config["train"]["steps"] * 2 * 16
        assert row["tau_hidden"] > 0 and row["params"] > 0
        if cell is trunk:
            assert row["branched_from"] is None or row["branched_from"] != row["branched_from"]
        else:
            assert row["branched_from"] == trunk.trial_id
            assert row["branch_step"] == cell.config["train"]["steps"] // 2
            assert metrics[cell.trial_id]["resumed_from"] == row["branch_step"]
    store = Store(root)  # branch points gone once stored; the stable end kept for extension
    assert not any(Path(point_path(store, c.trial_id)).exists() for c in plan.cells)
    assert Path(stable_end_path(store, families(plan)[0].family_id)).exists()


class Kill(Exception):
    pass


@pytest.mark.slow  # seconds on an idle machine: four short trainings
def test_a_killed_trunk_resumes_and_its_branches_still_match(tmp_path):
    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [4, 12]))
    trunk = max(plan.cells, key=lambda c: c.config["train"]["steps"])
    short = min(plan.cells, key=lambda c: c.config["train"]["steps"])

    def killer(point):
        if point["step"] == 9:
            raise Kill

    with pytest.raises(Kill):
        run_cells(plan, root, order=[trunk], on_eval=killer)
    store = Store(root)
    assert Path(point_path(store, short.trial_id)).exists()  # saved at step 2, kept
    assert Path(store.root, "checkpoints", f"{trunk.trial_id}.pt").exists()
    metrics = run_cells(plan, root)
    assert metrics[trunk.trial_id]["resumed_from"] == 6  # killed at 9 before saving it
    assert metrics[short.trial_id]["resumed_from"] == 2
    rows = read_tables(root).trials.set_index("trial_id")
    for cell in plan.cells:
        assert rows.loc[cell.trial_id, "final_eval_loss"] == separate(cell).final_eval_loss
    assert not Path(point_path(store, short.trial_id)).exists()


@pytest.mark.slow  # seconds on an idle machine: four short trainings
def test_a_longer_length_added_later_continues_the_family(tmp_path):
    root = tmp_path / "r"
    run_cells(plan_of(horizon_doc(root, [4, 8])), root)
    plan = plan_of(horizon_doc(root, [4, 8, 12]))
    longest = max(plan.cells, key=lambda c: c.config["train"]["steps"])
    metrics = run_cells(plan, root)
    assert metrics[longest.trial_id]["resumed_from"] == 4  # the 8-step run's cooldown start
    row = read_tables(root).trials.set_index("trial_id").loc[longest.trial_id]
    assert row["final_eval_loss"] == separate(longest).final_eval_loss
    assert row["branch_step"] == 4


@pytest.mark.slow  # seconds on an idle machine: four short trainings
def test_divergence_in_the_trunk_marks_branches_it_had_not_reached(tmp_path):
    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [8, 16], lr=50.0, grad_clip=None, diverge_patience=1,
                               diverge_smoothing=0.0, diverge_delta=0.01))
    run_cells(plan, root)
    tables = read_tables(root)
    rows = tables.trials.set_index("trial_id")
    for cell in plan.cells:
        ref = separate(cell)
        assert ref.diverged and rows.loc[cell.trial_id, "status"] == "diverged"
        assert rows.loc[cell.trial_id, "diverge_step"] == ref.diverge_step
        steps = tables.steps[tables.steps.trial_id == cell.trial_id]
        assert steps["step"].tolist() == [h["step"] for h in ref.history]
    trunk = max(plan.cells, key=lambda c: c.config["train"]["steps"])
    short = min(plan.cells, key=lambda c: c.config["train"]["steps"])
    assert rows.loc[short.trial_id, "branched_from"] == trunk.trial_id  # copied, not trained
    assert rows.loc[short.trial_id, "wall_time_s"] == 0.0
    assert rows.loc[short.trial_id, "branch_step"] == rows.loc[trunk.trial_id, "diverge_step"]


# -- bad input -----------------------------------------------------------------------------------
BAD = [
    ("cooldown zero", {"schedule": "wsd", "cooldown": 0}, "train.cooldown"),
    ("cooldown above one", {"schedule": "wsd", "cooldown": 1.5}, "train.cooldown"),
    ("warmup and cooldown exceed the run", {"schedule": "wsd", "warmup": 8, "cooldown": 0.5},
     "train.cooldown"),
    ("branch true without wsd", {"schedule": "cosine", "branch": True}, "train.branch"),
    ("unknown weight decay mode", {"weight_decay_mode": "decoupled"}, "train.weight_decay_mode"),
    ("independent decay with sgd", {"optimizer": "sgd", "weight_decay_mode": "independent"},
     "train.weight_decay_mode"),
]


@pytest.mark.parametrize("case,train,needle", BAD, ids=[c[0] for c in BAD])
def test_bad_horizon_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, case, train,
                                                               needle):
    storage = tmp_path / "results"
    doc = tiny_sweep("bad", storage=str(storage))
    doc["train"].update(train)
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    for argv in (["validate", str(path)], ["sweep", str(path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0], err
        assert "Traceback" not in err[0]
    assert not storage.exists()


def test_warmup_and_the_default_cooldown_must_fit_the_run():
    """The check ran only on a cooldown given explicitly: with the default 0.2, warmup 5 of 5
    steps was accepted and the whole run trained as warmup."""
    with pytest.raises(ValueError, match="warmup .5 steps. \\+ cooldown .0.2 of the run"):
        TrialConfig(train={"schedule": "wsd", "warmup": 5, "steps": 5})
    assert TrialConfig(train={"schedule": "wsd", "warmup": 4, "steps": 5}).train.warmup == 4


@pytest.mark.parametrize("fraction,total,steps", [(0.29, 50, 15), (0.35, 90, 32),
                                                  (0.35, 170, 60), (0.2, 60, 12), (0.25, 6, 2)])
def test_the_cooldown_is_its_fraction_of_the_run_rounded_half_up(fraction, total, steps):
    """Half up as the docs say, not as the float product falls (0.29 * 50 = 14.4999...: 14)."""
    assert cooldown_steps(total, fraction) == steps


def test_bad_horizon_values_on_an_axis_name_the_axis(tmp_path, capsys):
    storage = tmp_path / "results"
    doc = horizon_doc(storage, [10, 1])  # 1 step: warmup 1 + cooldown 1 > 1
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.cooldown" in err[0] and "1 steps" in err[0], err
    assert not storage.exists()


def test_rng_untouched_by_evaluation():
    """Branch points are taken between eval points too: evaluation must not use the RNG."""
    torch.manual_seed(0)
    before = torch.get_rng_state()
    cfg = TrialConfig.model_validate({"model": {"n_layer": 1, "d_state": 4, "base_width": 16},
                                      "width": 16, "train": {"steps": 1, "batch_size": 2,
                                                             "seq_len": 16, "eval_batches": 1}})
    from mutransfer.train import _build

    trial = _build(cfg)
    state = torch.get_rng_state()
    trial.stepper.evaluate(trial.eval_set)
    assert torch.equal(state, torch.get_rng_state())
    assert before.shape == state.shape


def test_phases_put_trunks_first_and_dry_run_says_where_each_length_starts(tmp_path):
    from types import SimpleNamespace

    from mutransfer.results.store import StoreState
    from mutransfer.sweep.plan.horizon import describe
    from mutransfer.sweep.run.horizon import phases

    root = tmp_path / "r"
    plan = plan_of(horizon_doc(root, [4, 8, 16]))
    work = SimpleNamespace(cells=plan.cells,
                           horizon=roles(plan, {c.trial_id for c in plan.cells}))
    first, second = phases(work)
    assert [c.config["train"]["steps"] for c in first] == [16]
    assert sorted(c.config["train"]["steps"] for c in second) == [4, 8]
    lines = describe(plan, StoreState(), None)
    assert "(0.786x)" in lines[0]  # (16 + 8·0.5 + 4·0.5) / 28 steps at cooldown 0.5
    assert any("16 steps" in x and "trunk, from step 0" in x for x in lines)
    assert any("4 steps" in x and "branches from the trunk at step 2" in x for x in lines)
    # a longer length added later: the stored stable end (step 8 of the 16-step run) is where
    # it continues; a shorter one with no state at or before its cooldown reruns
    store = Store(root)
    fam = families(plan)[0].family_id
    Path(stable_end_path(store, fam)).parent.mkdir(parents=True)
    torch.save({"step": 8}, stable_end_path(store, fam))
    longer = plan_of(horizon_doc(root, [2, 4, 8, 16, 32]))
    done = StoreState(complete={c.trial_id: {} for c in plan.cells})
    lines = describe(longer, done, store)
    assert any("32 steps" in x and "continues the family's saved state at step 8" in x
               for x in lines), lines
    assert any("2 steps" in x and "reruns from step 0" in x for x in lines), lines
