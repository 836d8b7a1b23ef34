"""`mutransfer check`'s verdict reads the lr* drift over every width it was asked about: a
drift interval inside ±tolerance from only some of check.widths (a width where no LR of the
grid trained has no lr* and drops out of the fit) is no PASS."""

from __future__ import annotations

import pandas as pd

from mutransfer.analysis.checkverdict import decide

FLAT = pd.DataFrame([{"parameterization": "mup_ssm", "layer": -1, "quantity": "logits",
                      "step": s, "kind": "h", "slope": 0.0, "se": 0.01, "status": "ok"}
                     for s in range(3)])
COORD = pd.DataFrame({"layer": [-1], "quantity": ["logits"], "order": [0]})
INSIDE = {"slope": 0.01, "ci_low": -0.05, "ci_high": 0.07, "n_edge": 0, "note": "",
          "se_seeds": 0.02, "se_placement": 0.02, "ci_df": 4}


def test_a_drift_inside_the_bound_over_all_widths_passes():
    v = decide(FLAT, COORD, {}, {**INSIDE, "n_widths": 3, "widths": "16,32,64"}, 0.12,
               seeds=2, widths=3)
    assert v.verdict == "PASS"


def test_a_drift_inside_the_bound_from_fewer_widths_than_asked_is_inconclusive():
    v = decide(FLAT, COORD, {}, {**INSIDE, "n_widths": 2, "widths": "16,32"}, 0.12, seeds=2,
               widths=3)
    assert v.verdict == "INCONCLUSIVE", v  # was PASS: the widest width had no lr*
    assert "2 of 3 widths (16,32)" in v.reason
    assert any("move check.lr below" in a for a in v.advice)


def test_a_drift_outside_the_bound_from_fewer_widths_still_fails():
    outside = {**INSIDE, "slope": 0.6, "ci_low": 0.4, "ci_high": 0.8, "n_widths": 2}
    assert decide(FLAT, COORD, {}, outside, 0.12, seeds=2, widths=3).verdict == "FAIL"
