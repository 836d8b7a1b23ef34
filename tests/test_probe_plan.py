"""Valid but unusual sweep files become the plan the user meant, or one line saying why not.

Found by probing the plan with files an outside user might write: an LR range whose ends are no
whole number of steps apart ran an LR above the range; two axis values that validate to one
config (`[0.001, "1e-3"]`, `[true, 1]`) ran as one cell with the count saying two; a
`train.steps` axis beside a token budget ran identical runs under different ids; LRs equal
after rounding were two trials the analysis reads as one; `tokens: 1e6` (text to YAML 1.1)
was refused as "unable to parse string as an integer"; the order of `model.roles` (first match
wins) was not part of the trial id; and the JSON schema passed axes the plan refuses and
flagged files mutransfer reads.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.config import TrainConfig, TrialConfig
from mutransfer.errors import UserError
from mutransfer.sweep.plan.axes import parameterizations, parse_axes
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.identity import canonical_json, trial_id
from mutransfer.sweep.plan.packing import check_fit
from mutransfer.sweep.plan.spec import SweepSpec, json_schema, load_spec
from tests.sweeps import plan_accepts

BASE: dict[str, Any] = {
    "name": "probe",
    "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
    "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
}


def sweep(axes: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**BASE, **top, "axes": axes}


def plan_of(doc: dict[str, Any]):
    return build_plan(SweepSpec.model_validate(doc))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


# -- LR ranges -----------------------------------------------------------------------------------

def test_an_lr_range_that_is_no_whole_number_of_steps_is_refused_in_one_line(tmp_path, capsys):
    """[-10, -8.5] at one LR per octave ran 2^-10, 2^-9 and 2^-8: 2^-8 is above the range."""
    doc = sweep({"width": [16], "lr": {"log2": [-10, -8.5], "per_octave": 1}},
                storage=str(tmp_path / "r"))
    path = write(tmp_path, yaml.safe_dump(doc))
    assert main(["validate", str(path), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "axes.lr.log2: [-10, -8.5] is 1.5 steps" in err, err
    assert "the grid would end at 2^-9" in err
    assert not (tmp_path / "r").exists()


def test_an_uneven_range_given_per_parameterization_is_refused_naming_it():
    doc = sweep({"width": [16], "parameterization": ["sp", "mup"],
                 "lr": {"sp": {"log2": [-10, -8]}, "mup": {"log2": [-10, -9.5]}}})
    with pytest.raises(UserError, match=r"axes.lr.mup.log2: \[-10, -9.5\] is 0.5 steps"):
        plan_of(doc)


def test_an_adaptive_search_samples_an_uneven_range_and_no_grid_lr_lies_above_it():
    doc = sweep({"width": [16], "lr": {"log2": [-10, -8.5]}}, search={"kind": "optuna"})
    group = plan_of(doc).groups[0]
    assert (group.log2_lo, group.log2_hi) == (-10, -8.5)
    spec = SweepSpec.model_validate(doc)
    lrs = parse_axes(spec.axes, parameterizations(spec))[1].lr_for("sp").values
    assert max(lrs) <= 2.0 ** -8.5


def test_a_range_whole_up_to_float_rounding_is_a_grid_with_both_ends():
    """(-7.3 - -8.3) * 10 is 10.000000000000009, not 10: still ten steps, 11 LRs."""
    lrs = sorted(c.columns["lr"] for c in plan_of(sweep(
        {"width": [16], "lr": {"log2": [-8.3, -7.3], "per_octave": 10}})).cells)
    assert len(lrs) == 11
    assert math.isclose(math.log2(lrs[-1]), -7.3, abs_tol=1e-12)


def test_lrs_equal_after_rounding_are_refused_as_a_repeat():
    """0.001 and 0.0010000000001 are one LR to the analysis (two trials of each seed)."""
    with pytest.raises(UserError, match=r"axes.lr\[2\]: 0.0010000000001 repeats axes.lr\[0\] "
                                        r"\(0.001: within a relative 1e-09"):
        plan_of(sweep({"width": [16], "lr": [0.001, 0.002, 0.0010000000001]}))


def test_lrs_in_any_order_are_the_same_cells():
    a = {c.trial_id for c in plan_of(sweep({"width": [16], "lr": [0.003, 0.001, 0.002]})).cells}
    b = {c.trial_id for c in plan_of(sweep({"width": [16], "lr": [0.001, 0.002, 0.003]})).cells}
    assert a == b and len(a) == 3


# -- two cells, one run --------------------------------------------------------------------------

@pytest.mark.parametrize("axis, values, named", [
    ("train.weight_decay", [0.001, "1e-3"], "axes.train.weight_decay: 0.001 and '1e-3'"),
    ("model.tie_embeddings", [True, 1], "axes.model.tie_embeddings: True and 1"),
    ("train.tokens", ["1e3", 1000], "axes.train.tokens: '1e3' and 1000"),
    ("param", [{"name": "sp"}, {"name": "sp", "depth": "none"}], "axes.param: {'name': 'sp'}"),
])
def test_two_axis_values_that_validate_to_one_trial_are_refused(axis, values, named):
    """Before, the second was dropped without a word: 2 cells counted, 1 planned."""
    with pytest.raises(UserError, match="give the same trial") as info:
        plan_of(sweep({"width": [16], "lr": [0.001], axis: values}))
    assert named in str(info.value)


def test_two_axis_values_that_validate_to_one_adaptive_group_are_refused():
    doc = sweep({"width": [16], "lr": {"log2": [-10, -8]}, "train.weight_decay": [0, "0e0"]},
                search={"kind": "optuna"})
    with pytest.raises(UserError, match="axes.train.weight_decay: 0 and '0e0' give the same"):
        plan_of(doc)


def test_a_steps_axis_beside_a_token_budget_is_refused():
    """The budget sets the length: steps 10 and 20 both trained 10 steps, under two ids and
    labelled with two lengths."""
    doc = sweep({"width": [16], "lr": [0.001], "train.steps": [10, 20]},
                train={**BASE["train"], "tokens": 320})
    with pytest.raises(UserError, match=r"axes.train.steps: 10 and 20 steps are not used: "
                                        r"train.tokens 320 sets the run's length \(10 steps"):
        plan_of(doc)


def test_a_tokens_axis_beside_a_steps_value_sweeps_the_budgets():
    doc = sweep({"width": [16], "lr": [0.001], "train.tokens": [320, 640]},
                train={**BASE["train"], "steps": 10})
    lengths = sorted(TrainConfig(**c.config["train"]).total_steps for c in plan_of(doc).cells)
    assert lengths == [10, 20]


# -- numbers and booleans as YAML 1.1 reads them -------------------------------------------------

def test_a_count_written_with_an_exponent_is_that_number(tmp_path):
    """`tokens: 1e6` is text to yaml.safe_load (YAML 1.1) and a number to YAML 1.2 and the
    schema; it was refused as "unable to parse string as an integer"."""
    text = ("name: probe\nmodel: {n_layer: 1, d_state: 4, base_width: 16}\n"
            "train: {tokens: 1e4, batch_size: 2, seq_len: 16, eval_every: 1e1}\n"
            "width: 1.6e1\nresources: {max_concurrent: 2e0}\n")
    spec = load_spec(write(tmp_path, text))
    cell = build_plan(spec).cells[0]
    assert cell.config["train"]["tokens"] == 10_000 and cell.config["train"]["eval_every"] == 10
    assert cell.width == 16 and spec.resources.max_concurrent == 2
    assert TrialConfig(train={"tokens": "1.0e4"}).train.tokens == 10_000


def test_text_for_a_number_keeps_the_fields_own_checks():
    with pytest.raises(ValueError, match="fractional part"):
        TrainConfig(steps="1.5e0")
    with pytest.raises(ValueError, match="out of range for an integer"):
        TrainConfig(steps="1e18")
    with pytest.raises(ValueError, match="not a finite number"):
        TrainConfig(lr="1e400")
    assert SweepSpec(name="1e3").name == "1e3"  # a name is text, whatever it looks like


def test_whole_floats_and_exponents_are_widths_and_seeds():
    cells = plan_of(sweep({"width": [16.0, "3.2e1"], "seed": [0, 1.0], "lr": [0.001]})).cells
    assert sorted({c.width for c in cells}) == [16, 32]
    assert sorted({c.config["train"]["seed"] for c in cells}) == [0, 1]
    with pytest.raises(UserError, match=r"axes.width\[1\]: 16 repeats axes.width\[0\]"):
        plan_of(sweep({"width": [16, 16.0], "lr": [0.001]}))
    with pytest.raises(UserError, match=r"axes.seed\[0\]: 0.5 is not an integer"):
        plan_of(sweep({"seed": [0.5], "lr": [0.001]}))


# -- trial ids -----------------------------------------------------------------------------------

def _factory(roles: dict[str, str]) -> dict[str, Any]:
    return TrialConfig(width=64, model={"arch": "examples.tiny_gpt:tiny_gpt", "roles": roles}
                       ).model_dump(mode="json")


def test_the_order_of_model_roles_is_part_of_the_trial_id():
    """The first pattern a parameter matches gives its role: these are two models."""
    first = _factory({"emb.*": "embedding", "*": "hidden"})
    second = _factory({"*": "hidden", "emb.*": "embedding"})
    assert trial_id(first) != trial_id(second)
    assert list(json.loads(canonical_json(first))["model"]["roles"]) == ["emb.*", "*"]


def test_sorted_roles_and_every_other_config_keep_the_id_earlier_releases_gave():
    for config in (_factory({"*": "hidden", "emb.*": "embedding"}),
                   TrialConfig(width=256, train={"lr": 0.003}).model_dump(mode="json")):
        before = json.dumps(config, sort_keys=True, separators=(",", ":"))
        assert canonical_json(config) == before
    config = TrialConfig().model_dump(mode="json")
    assert trial_id(config) == trial_id(json.loads(json.dumps(config)))


# -- the JSON schema accepts what the plan accepts -----------------------------------------------

SCHEMA_CASES = [  # (a sweep file's top-level keys as an editor (YAML 1.2) reads them)
    {"axes": {"width": [4]}},
    {"axes": {"width": []}},
    {"axes": {"width": [16, 16]}},
    {"axes": {"width": [16.0, 32]}},
    {"axes": {"seed": [0, 1.0]}},
    {"axes": {"lr": [-0.1]}},
    {"axes": {"lr": {}}},
    {"axes": {"lr": {"log2": [-2000, 0]}}},
    {"axes": {"lr": ["1e-3", 0.01]}},
    {"axes": {"parameterization": ["sp", "sp"]}},
    {"axes": {"foo": [1]}},
    {"axes": {"width.x": [1]}},
    {"axes": {"train.steps": 5}},
    {"axes": {"train.steps": []}},
    {"axes": {"model": [1]}},
    {"axes": {"model": [{"n_layer": 2}]}},
    {"axes": {"optimizer": ["adam", "sgd"]}},
    {"axes": None},
    {"data": None},
    {"model": {"n_layer": 1, "d_state": 4, "base_width": 16, "tie_embeddings": "yes"}},
    {"train": {**BASE["train"], "branch": "off"}},
    {"train": {**BASE["train"], "lr": "1e-3", "weight_decay": "0.01"}},
    {"resources": {"gpus_per_trial": {"abc": 1}}},
    {"resources": {"gpus_per_trial": {"16": 0.5}}},
]



@pytest.mark.parametrize("top", SCHEMA_CASES, ids=lambda t: json.dumps(t)[:60])
def test_the_schema_accepts_exactly_what_theplan_accepts(top):
    jsonschema = pytest.importorskip("jsonschema")  # a dependency of ray
    errors = list(jsonschema.Draft202012Validator(json_schema()).iter_errors(
        {**BASE, **top}))
    assert (not errors) == plan_accepts({**BASE, **_as_yaml11(top)}), [e.message for e in errors]


def _as_yaml11(value: Any) -> Any:
    """What yaml.safe_load (YAML 1.1) reads where an editor (YAML 1.2) reads `yes`/`off`."""
    if isinstance(value, dict):
        return {k: _as_yaml11(v) for k, v in value.items()}
    return {"yes": True, "off": False}.get(value, value) if isinstance(value, str) else value


# -- GPU shares ----------------------------------------------------------------------------------

BIG = {"model": {"n_layer": 8, "d_state": 16, "base_width": 16},
       "train": {"steps": 10, "batch_size": 64, "seq_len": 2048, "device": "cuda"}}


@pytest.mark.parametrize("share", [1, 2])
def test_a_trial_one_gpu_cannot_hold_is_refused_whatever_share_it_is_given(share):
    """A trial trains on one device (an estimated 160 GB here, on 1 GB GPUs): before, a
    fixed share of 1 or more GPUs was never checked and the trial ran out of memory."""
    doc = sweep({"width": [4096], "lr": [0.001]}, **BIG,
                resources={"gpus_per_trial": share, "gpu_memory_gb": 1})
    plan = plan_of(doc)
    with pytest.raises(UserError, match=r"width 4096 needs an estimated 160.2 GB .* more than "
                                        r"one GPU of gpu_memory_gb 1 holds; lower "
                                        r"train.batch_size or seq_len$"):
        check_fit(plan.spec.resources, [c.config for c in plan.cells])


def test_a_fixed_fraction_too_small_is_refused_with_the_auto_hint_and_a_fitting_one_runs():
    doc = sweep({"width": [4096], "lr": [0.001]}, **BIG,
                resources={"gpus_per_trial": 0.5, "gpu_memory_gb": 200})
    plan = plan_of(doc)
    with pytest.raises(UserError, match=r"gpus_per_trial 0.5 of a GPU .* or use gpus_per_trial "
                                        r"auto$"):
        check_fit(plan.spec.resources, [c.config for c in plan.cells])
    for share in (1, 2, "auto"):
        fits = plan_of({**doc, "resources": {"gpus_per_trial": share, "gpu_memory_gb": 200}})
        check_fit(fits.spec.resources, [c.config for c in fits.cells])
