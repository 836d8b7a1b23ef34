"""`mutransfer check`: a width listed twice in check.widths, and the culprit's words for a
tensor initialised to zero.

A check file's widths are a set of models to compare: listed in any order they read as the
same set, but a width given twice (a typo: 128 for 256) must be refused in one line, exit 2,
nothing written, as check.seeds and the sweep's own width axis refuse a repeat; before, it was
merged without a word, and the check ran fewer widths (a shorter lever arm for the drift)
than the file lists.

A governed tensor initialised to zero at every width (muP's zero readout) is judged on its
update's own RMS, since ‖W_0‖ = 0 leaves no relative update; a FAIL naming it must say so,
not "its relative update ‖ΔW‖/‖W‖" (a ratio over zero)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from mutransfer.analysis.checkverdict import culprit_of, judge_all
from mutransfer.analysis.updates import expected_exponents, update_slopes
from mutransfer.cli import main
from mutransfer.commands.check_spec import CheckSpec
from mutransfer.param.tables import TABLES
from tests.test_bad_input_commands import check_doc


@pytest.mark.parametrize("widths,entries", [([16, 32, 32], (1, 2)), ([64, 16, 32, 64], (0, 3))])
def test_a_width_given_twice_is_refused_in_one_line_with_nothing_written(tmp_path, capsys,
                                                                          widths, entries):
    out = tmp_path / "out"
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(check_doc(**{"check.widths": widths})))
    code = main(["check", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    first, then = entries
    assert "check.widths" in err and f"width {widths[first]} is given twice" in err, err
    assert f"entries {first} and {then}" in err, err
    assert not out.exists()


def test_widths_in_any_order_are_the_same_set_in_increasing_order():
    """Order carries no meaning (the stages sort by width): not a refusal."""
    spec = CheckSpec(name="c", model={"arch": "mamba"}, check={"widths": [64, 16, 32]})
    assert spec.check.widths == [16, 32, 64]


def _sizes() -> pd.DataFrame:
    """params.parquet of 4 seeds at widths 32-128 (base 32, m = width / 32): a hidden matrix
    as muP has it (std ∝ m^-½, Adam LR ∝ 1/m: relative update ∝ m^-½) and a zero-init
    readout whose Adam LR wrongly grows as m (its update's RMS ∝ m^+1; the rule: m^0)."""
    rng = np.random.default_rng(0)
    rows = []
    for width in (32, 64, 128):
        m = width / 32
        for seed in range(4):
            for step in range(3):
                noise = 1 + 0.01 * rng.standard_normal()
                run = {"parameterization": "mup", "optimizer": "adamw", "width": width,
                       "seed": seed, "step": step}
                rows.append({**run, "param": "fc.weight", "role": "hidden", "order": 0,
                             "w_rms": 0.02 * m**-0.5 * noise,
                             "dw_rms": 3e-3 * step / m * noise})
                rows.append({**run, "param": "head.weight", "role": "readout", "order": 1,
                             "w_rms": 0.0, "dw_rms": 3e-3 * step * m * noise})
    return pd.DataFrame(rows)


def test_a_zero_init_tensors_culprit_names_its_updates_rms_not_a_relative_update():
    expected = expected_exponents({"fc.weight": "hidden", "head.weight": "readout"},
                                  TABLES["mup"], "adamw")
    params = update_slopes(_sizes(), expected, 0.2)
    acts = pd.DataFrame({"parameterization": ["mup"], "layer": [-1], "quantity": ["logits"],
                         "step": [1], "kind": ["h"], "slope": [0.0], "se": [0.01],
                         "df": [3.0], "se_seeds": [0.01], "se_fit": [0.0], "n_seeds": [4]})
    judged = judge_all(acts, params, 0.2, 0.05)
    coord = pd.DataFrame({"layer": [-1], "quantity": ["logits"], "order": [0]})
    c = culprit_of(judged, coord, {}, {"fc.weight": 0, "head.weight": 1})
    assert c is not None and c.quantity == "head.weight" and c.role == "readout"
    assert c.slope == pytest.approx(1.0, abs=0.02) and c.expected == 0.0
    text = c.text()
    assert "its update's RMS (its init is zero)" in text, text
    assert "relative update" not in text and "‖ΔW‖/‖W‖" not in text, text
    # a governed tensor with an init keeps the relative update's words
    hidden = judged[(judged["quantity"] == "fc.weight") & (judged["kind"] == "update")]
    assert hidden["relative"].astype(bool).all() and (hidden["status"] == "ok").all()
