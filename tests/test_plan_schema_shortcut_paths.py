"""The JSON schema reads an axis written as its dotted path (`train.lr`, `train.seed`,
`param.name`) as it reads the shortcut (`lr`, `seed`, `parameterization`), and an axis given
as null as the plan does: refused.

Found by probing: `train.lr: {log2: [-8, -5]}` and `train.lr: {sp: [...]}`, which
mutransfer/sweep/plan/axes.py reads as the `lr` axis, were flagged by an editor's schema check,
while `train.lr: [-1]`, `train.seed: [0.5]`, `param.name: [foo]` and `lr: null` passed it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mutransfer.sweep.plan.spec import json_schema
from tests.sweeps import plan_accepts

BASE: dict[str, Any] = {
    "name": "schema-paths",
    "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
    "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
}

CASES = [
    {"train.lr": {"log2": [-8, -5]}},
    {"train.lr": {"log2": [-8, -5], "per_octave": 2}},
    {"train.lr": {"sp": [0.1, 0.01]}},
    {"train.lr": [0.1]},
    {"train.lr": [-1]},
    {"train.lr": [0.1, 0.1]},
    {"train.lr": {"foo": [0.1]}},
    {"train.seed": [0, 1]},
    {"train.seed": [0.5]},
    {"param.name": ["sp", "mup"]},
    {"param.name": ["foo"]},
    {"lr": None},
    {"width": None},
    {"train.lr": None},
]



@pytest.mark.parametrize("axes", CASES, ids=lambda a: json.dumps(a))
def test_the_schema_takes_a_shortcuts_dotted_path_as_it_takes_the_shortcut(axes):
    jsonschema = pytest.importorskip("jsonschema")  # a dependency of ray
    doc = {**BASE, "axes": axes}
    errors = list(jsonschema.Draft202012Validator(json_schema()).iter_errors(doc))
    assert (not errors) == plan_accepts(doc), [e.message for e in errors]
