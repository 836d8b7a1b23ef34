"""Sweep files: parsing, one-line errors that write nothing, grid expansion, stable trial ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.errors import UserError
from mutransfer.sweep.plan.cells import build_plan, load_plan
from mutransfer.sweep.plan.identity import trial_id
from mutransfer.sweep.plan.spec import SweepSpec, amount_for

BASE = {
    "name": "t",
    "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
    "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
}


def write(tmp_path: Path, doc: dict | str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def sweep(axes: dict, **top) -> dict:
    return {**BASE, **top, "axes": axes}


def plan_of(doc: dict):
    return build_plan(SweepSpec.model_validate(doc))


# -- malformed files: one line naming the field, exit 2, nothing written -------------------------

MALFORMED = [
    ("unknown parameterization", sweep({"parameterization": ["sp", "mup_sm"]}),
     "axes.parameterization"),
    ("negative LR", sweep({"lr": [0.001, -0.01]}), "axes.lr[1]"),
    ("empty axis", sweep({"seed": []}), "axes.seed"),
    ("unknown field", {**BASE, "train": {**BASE["train"], "stepz": 10}}, "train.stepz"),
    ("wrong type", {**BASE, "train": {**BASE["train"], "steps": "many"}}, "train.steps"),
    ("parquet without a path", {**BASE, "data": {"source": "parquet"}}, "path"),
    ("LR range upside down", sweep({"lr": {"log2": [-4, -12]}}), "axes.lr.log2"),
    ("width below base", sweep({"width": [8, 32]}), "axes.width"),
    ("unknown top-level key", {**BASE, "axis": {"lr": [0.1]}}, "axis"),
    ("unknown axis path", sweep({"train.stepz": [1, 2]}), "axes.train.stepz"),
    ("axis outside the config", sweep({"steps": [10, 20]}), "axes.steps"),
    ("LR missing for a parameterization",
     sweep({"parameterization": ["sp", "mup"], "lr": {"sp": [0.01]}}), "axes.lr"),
    ("negative GPUs", {**BASE, "resources": {"gpus_per_trial": {64: -1}}},
     "resources.gpus_per_trial"),
    ("axis not a list", sweep({"seed": 3}), "axes.seed"),
    ("unknown optimizer on an axis", sweep({"train.optimizer": ["adam", "lion"]}),
     "axes.train.optimizer"),
    ("name with a slash", {**BASE, "name": "../escape"}, "name"),
    ("two axes set one field", sweep({"lr": [0.1], "train.lr": [0.2]}), "axes.train.lr"),
]


@pytest.mark.parametrize("what,doc,field", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_sweep_is_one_line_naming_the_field_and_writes_nothing(
        tmp_path, capsys, what, doc, field):
    storage = tmp_path / "results"
    path = write(tmp_path, {**doc, "storage": str(storage)})
    for command in (["validate", str(path)], ["sweep", str(path)], ["sweep", str(path),
                                                                     "--dry-run"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("error: ") and field in lines[0], lines[0]
        assert "Traceback" not in err
    assert not storage.exists()


def test_not_yaml_and_not_a_mapping_are_one_line_errors(tmp_path, capsys):
    for text in ("name: [unclosed\n", "- just\n- a list\n"):
        path = write(tmp_path, text)
        assert main(["validate", str(path)]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_missing_data_files_stop_the_sweep_before_anything_is_written(tmp_path, capsys):
    storage = tmp_path / "results"
    doc = {**BASE, "data": {"source": "parquet", "path": str(tmp_path / "nowhere/*.parquet")},
           "storage": str(storage)}
    path = write(tmp_path, doc)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "data" in err and "nowhere" in err
    assert not storage.exists()
    # validate refuses it the same way, pointing at --no-data: the file alone (data on a cluster)
    assert main(["validate", str(path)]) == 2
    hint = capsys.readouterr().err.strip()
    assert hint.startswith(err) and "--no-data" in hint and len(hint.splitlines()) == 1
    assert main(["validate", "--no-data", str(path)]) == 0
    assert "(data not checked)" in capsys.readouterr().out


def test_relative_storage_with_a_driver_on_the_cluster_is_refused(tmp_path, capsys,
                                                                 monkeypatch):
    """With --address auto the driver runs on the cluster, e.g. as a Ray job in a copy of the
    working directory that is gone when it ends. (With a driver here, a relative storage is
    this machine's folder, checked on every node: tests/test_cluster.py.)"""
    path = write(tmp_path, {**BASE, "storage": "results/t"})
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(path), "--address", "auto"]) == 2
    err = capsys.readouterr().err
    assert "every node can reach" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()


def test_unreachable_address_is_one_line_exit_2(tmp_path, capsys):
    storage = tmp_path / "results"
    path = write(tmp_path, {**BASE, "storage": str(storage)})
    assert main(["sweep", str(path), "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "127.0.0.1:1" in err
    assert not storage.exists()
    assert main(["status", "raysubmit_1", "--address", "http://127.0.0.1:1"]) == 2
    assert "cannot reach" in capsys.readouterr().err


def test_submit_asks_the_cluster_about_a_relative_storage_and_refuses_files_outside(
        tmp_path, capsys):
    """A relative storage is checked with the cluster (tests/test_job_submit.py): a dashboard
    that is not there refuses it in one line, before anything is written."""
    path = write(tmp_path, {**BASE, "storage": "results/t"})
    assert main(["submit", str(path), "--address", "http://127.0.0.1:1",
                 "--working-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "results").exists()
    assert main(["submit", str(path), "--address", "http://127.0.0.1:1",
                 "--storage", str(tmp_path / "r"), "--working-dir", str(tmp_path / "sub")]) == 2
    assert "inside the working directory" in capsys.readouterr().err


# -- expansion -----------------------------------------------------------------------------------

def test_grid_is_the_product_of_the_axes_with_shortcuts_resolved(tmp_path, capsys):
    doc = sweep({"width": [16, 32], "parameterization": ["sp", "mup_ssm"],
                 "lr": {"log2": [-12, -4], "per_octave": 1}, "seed": [0, 1]})
    plan = plan_of(doc)
    assert len(plan.cells) == 2 * 2 * 9 * 2
    lrs = sorted({c.columns["lr"] for c in plan.cells})
    assert lrs == [2.0 ** e for e in range(-12, -3)]
    cell = plan.cells[0]
    cfg = TrialConfig.model_validate(cell.config)
    assert cfg.width == cell.columns["width"]
    assert cfg.param.name == cell.columns["parameterization"]
    assert cfg.train.lr == cell.columns["lr"] and cfg.train.seed == cell.columns["seed"]
    assert cfg.train.steps == 10 and cfg.model.n_layer == 1  # the base sections reach every cell
    assert main(["validate", str(write(tmp_path, doc))]) == 0
    assert "72 cells" in capsys.readouterr().out


def test_lr_ranges_per_parameterization(tmp_path):
    plan = plan_of(sweep({"parameterization": ["sp", "mup_ssm"],
                          "lr": {"sp": {"log2": [-10, -8], "per_octave": 2},
                                 "mup_ssm": [0.01, 0.02]}}))
    by_param: dict[str, list[float]] = {}
    for c in plan.cells:
        by_param.setdefault(c.columns["parameterization"], []).append(c.columns["lr"])
    assert sorted(by_param["sp"]) == pytest.approx([2 ** -10, 2 ** -9.5, 2 ** -9, 2 ** -8.5,
                                                    2 ** -8])
    assert sorted(by_param["mup_ssm"]) == [0.01, 0.02]


def test_lr_written_as_yaml_text_like_1e_3_is_a_number(tmp_path):
    path = write(tmp_path, "name: t\nmodel: {base_width: 16}\naxes:\n  lr: [1e-3, 3e-3]\n")
    plan = load_plan(path)
    assert sorted(c.columns["lr"] for c in plan.cells) == [0.001, 0.003]


def test_dotted_path_axes_reach_nested_fields_and_become_columns():
    plan = plan_of(sweep({"param.overrides.ssm_B.lr_mult": [0.5, 2.0],
                          "model.zero_real_fraction": [0.0, 0.1]}))
    assert len(plan.cells) == 4
    for c in plan.cells:
        cfg = TrialConfig.model_validate(c.config)
        assert cfg.param.overrides["ssm_B"].lr_mult == c.columns["param.overrides.ssm_B.lr_mult"]
        assert cfg.model.zero_real_fraction == c.columns["model.zero_real_fraction"]


def test_widest_cells_come_first():
    plan = plan_of(sweep({"width": [16, 64, 32], "lr": [0.01, 0.1]}))
    assert [c.width for c in plan.cells] == [64, 64, 32, 32, 16, 16]


def test_width_dependent_resources_take_the_largest_key_at_or_below_the_width():
    gpus = {64: 0.25, 1024: 1.0}
    assert [amount_for(gpus, w) for w in (32, 64, 512, 1023, 1024, 4096)] == \
        [0.25, 0.25, 0.25, 0.25, 1.0, 1.0]
    assert amount_for(0.5, 99) == 0.5


def test_adaptive_search_has_one_group_per_non_lr_assignment():
    plan = plan_of(sweep({"width": [16, 32], "parameterization": ["sp", "mup"],
                          "lr": {"log2": [-12, -4]}},
                         search={"kind": "optuna", "trials_per_width": 5}))
    assert len(plan.groups) == 4 and plan.n_trials == 20
    assert all((g.log2_lo, g.log2_hi) == (-12, -4) for g in plan.groups)
    with pytest.raises(UserError, match="axes.lr"):
        plan_of(sweep({"lr": [0.01]}, search={"kind": "optuna"}))


def test_schema_is_json_with_the_sections_typed(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"name", "axes", "model", "train", "resources", "search"} <= set(schema["properties"])
    assert "ModelConfig" in json.dumps(schema)


# -- trial identity ------------------------------------------------------------------------------

def test_trial_id_is_the_hash_of_the_resolved_config():
    plan = plan_of(sweep({"width": [32], "lr": [0.01]}))
    direct = TrialConfig.model_validate({"width": 32, "model": BASE["model"],
                                         "train": {**BASE["train"], "lr": 0.01}})
    assert plan.cells[0].trial_id == trial_id(direct)
    assert len(plan.cells[0].trial_id) == 16
    assert int(plan.cells[0].trial_id, 16) >= 0


def test_trial_id_ignores_key_order_spelled_defaults_and_axes_that_change_nothing(tmp_path):
    a = {"name": "a", "model": {"base_width": 16, "n_layer": 1},
         "train": {"steps": 10, "seq_len": 16}, "axes": {"lr": [0.01, 0.02], "width": [32]}}
    b = {"axes": {"width": [32], "lr": [0.02, 0.01], "seed": [0],
                  "train.optimizer": ["adamw"]},  # seed 0 and adamw are the defaults
         "train": {"seq_len": 16, "steps": 10, "optimizer": "adamw"},
         "model": {"n_layer": 1, "base_width": 16, "tie_embeddings": True}, "name": "b"}
    ids_a = {c.trial_id for c in load_plan(write(tmp_path, a, "a.yaml")).cells}
    ids_b = {c.trial_id for c in load_plan(write(tmp_path, b, "b.yaml")).cells}
    assert ids_a == ids_b and len(ids_a) == 2


def test_trial_id_changes_with_anything_that_changes_the_config():
    base = plan_of(sweep({"width": [32], "lr": [0.01]})).cells[0].trial_id
    for axes in ({"width": [48], "lr": [0.01]}, {"width": [32], "lr": [0.011]},
                 {"width": [32], "lr": [0.01], "seed": [1]},
                 {"width": [32], "lr": [0.01], "param.overrides.ssm_C.lr_mult": [2.0]}):
        assert plan_of(sweep(axes)).cells[0].trial_id != base


def test_a_value_repeated_in_an_axis_is_refused_not_run_once():
    """Before, [0.01, 0.01, 1e-2] ran one trial with nothing said (seed: [0, 0, 1]: two
    seeds where three were written)."""
    with pytest.raises(UserError, match=r"axes.lr\[1\]: 0.01 repeats axes.lr\[0\]"):
        plan_of(sweep({"lr": [0.01, 0.01, 1e-2]}))


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parents[1].glob("sweeps/*.yaml")),
                         ids=lambda p: p.name)
def test_the_cell_count_from_the_axes_alone_is_the_number_of_cells(path):
    """What --max-cells is checked against (counted without building a cell) is what runs."""
    from mutransfer.sweep.plan.size import count_trials
    from mutransfer.sweep.plan.spec import load_spec

    assert count_trials(load_spec(path)) == load_plan(path).n_trials


def test_a_value_the_file_sets_and_an_axis_replaces_is_named_in_a_note(tmp_path, capsys):
    """`train.lr: 0.003` beside an `lr` axis (a trial config's section copied in): the axis
    sets every cell's LR. Before, the file's value was dropped without a word."""
    doc = {**BASE, "train": {**BASE["train"], "lr": 0.003}, "storage": str(tmp_path / "r"),
           "axes": {"width": [16, 32], "lr": [0.001, 0.01], "model.n_layer": [1, 2]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    notes = ["note: train.lr 0.003 in the file is not used: the lr axis sets it in every cell",
             "note: model.n_layer 1 in the file is not used: the model.n_layer axis sets it "
             "in every cell"]
    assert load_plan(path).replaced_by_axes() == notes
    for argv in (["validate", str(path), "--no-data"], ["sweep", str(path), "--dry-run"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert all(n in out for n in notes), out
    unset = {**doc, "train": BASE["train"], "model": {"d_state": 4, "base_width": 16}}
    path.write_text(yaml.safe_dump(unset))
    assert load_plan(path).replaced_by_axes() == []
    assert not (tmp_path / "r").exists()
