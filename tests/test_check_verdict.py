"""`mutransfer check`'s verdict (analysis/checkverdict.py) on synthetic slopes and drifts,
and the check file's sweep (commands/check_spec.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from mutransfer.analysis.checkverdict import decide
from mutransfer.commands.check import parse_budget
from mutransfer.commands.check_spec import CheckSpec
from mutransfer.errors import UserError

BEHIND = {"tok": {"tok.weight": "embedding"}, "blocks.0.fc": {"blocks.0.fc.weight": "hidden"},
          "logits": {"head.weight": "readout"}}


def judged(*violations):
    """Slopes of three quantities at steps 0-2 (h and dh); `violations`: (quantity, step,
    kind, slope) made robust."""
    rows = []
    for q in ("tok", "blocks.0.fc", "logits"):
        for step in range(3):
            for kind in ("h", "dh") if step else ("h",):
                rows.append({"parameterization": "mup", "layer": -1, "quantity": q,
                             "step": step, "kind": kind, "slope": 0.01, "se": 0.02,
                             "status": "ok"})
    df = pd.DataFrame(rows)
    for q, step, kind, slope in violations:
        sel = (df["quantity"] == q) & (df["step"] == step) & (df["kind"] == kind)
        df.loc[sel, ["slope", "status"]] = [slope, "robust"]
    return df


COORD = pd.DataFrame({"layer": [-1, -1, -1], "quantity": ["tok", "blocks.0.fc", "logits"],
                      "order": [0, 1, 2]})
GOOD_DRIFT = {"slope": 0.05, "ci_low": -0.1, "ci_high": 0.2, "n_edge": 0, "note": ""}


def test_pass_needs_flat_coordinates_and_a_drift_interval_inside_the_bound():
    v = decide(judged(), COORD, BEHIND, GOOD_DRIFT)
    assert v.verdict == "PASS" and v.culprit is None


def test_fail_names_the_first_violation_in_forward_order_at_the_earliest_step():
    v = decide(judged(("logits", 1, "dh", 0.9), ("blocks.0.fc", 2, "dh", 0.8),
                      ("logits", 2, "dh", 1.0)), COORD, BEHIND, GOOD_DRIFT)
    assert v.verdict == "FAIL" and v.named_role == "readout"
    assert "lacks its 1/m multiplier" in v.reason and "width^+0.90" in v.reason
    v = decide(judged(("logits", 0, "h", 0.5), ("blocks.0.fc", 0, "h", 0.5)), COORD, BEHIND,
               None)
    assert v.verdict == "FAIL" and v.named_role == "hidden"
    assert "not scaled as 1/√fan_in" in v.reason


def test_a_drift_outside_the_bound_fails_and_one_across_it_is_inconclusive():
    far = {"slope": -0.9, "ci_low": -1.2, "ci_high": -0.6}
    v = decide(judged(), COORD, BEHIND, far)
    assert v.verdict == "FAIL" and "moves down by 0.90 octave" in v.reason
    wide = {"slope": -0.2, "ci_low": -0.7, "ci_high": 0.3}
    v = decide(judged(), COORD, BEHIND, wide, seeds=2, steps=60, widths=3)
    assert v.verdict == "INCONCLUSIVE" and "more seeds (now 2)" in v.advice[0]
    edge = {"slope": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
            "n_edge": 1, "note": "1 of 3 optima on the grid edge"}
    v = decide(judged(), COORD, BEHIND, edge)
    assert v.verdict == "INCONCLUSIVE" and any("widen check.lr" in a for a in v.advice)
    assert decide(judged(), COORD, BEHIND, None).verdict == "INCONCLUSIVE"


def test_budget_parsing():
    assert parse_budget("20000").steps == 20000
    assert parse_budget("10m").minutes == 10
    with pytest.raises(UserError, match="--budget"):
        parse_budget("ten")


def test_check_file_becomes_a_transfer_sweep():
    spec = CheckSpec(name="c", model={"arch": "mamba"}, param={"name": "mup_ssm"},
                     check={"widths": [128, 64, 256], "seeds": [0, 1]})
    sweep = spec.sweep()
    assert sweep["axes"]["width"] == [64, 128, 256] and sweep["axes"]["seed"] == [0, 1]
    assert sweep["search"]["kind"] == "transfer"
    assert sweep["storage"].endswith("results/check/c/sweep")


def test_logit_updates_may_shrink_to_the_readout_init_term_but_no_further():
    from mutransfer.analysis.checkverdict import judge_with_logit_floor
    from mutransfer.analysis.coordverdict import judge

    def slopes_with(slope):  # three quantities' slopes, 8 seeds' worth of df; logits dh at t1
        sl = judged().drop(columns="status").assign(df=7.0)
        sel = (sl["quantity"] == "logits") & (sl["step"] == 1) & (sl["kind"] == "dh")
        sl.loc[sel, ["slope", "se"]] = [slope, 0.02]
        return sl

    first = slopes_with(-0.32)  # a correct muP's first logit updates
    assert decide(judge(first, 0.15, 0.05), COORD, BEHIND, GOOD_DRIFT).verdict == "FAIL"
    relaxed = judge_with_logit_floor(first, 0.15, 0.05)
    assert decide(relaxed, COORD, BEHIND, GOOD_DRIFT).verdict == "PASS"
    twice = judge_with_logit_floor(slopes_with(-1.0), 0.15, 0.05)
    assert decide(twice, COORD, BEHIND, GOOD_DRIFT).named_role == "readout"
    grows = judge_with_logit_floor(slopes_with(0.5), 0.15, 0.05)
    assert decide(grows, COORD, BEHIND, GOOD_DRIFT).verdict == "FAIL"


def test_the_logits_name_the_readout_even_when_it_is_tied_to_the_embedding():
    tied = {**BEHIND, "logits": {"tok.weight": "embedding"}}
    v = decide(judged(("logits", 0, "h", 0.5)), COORD, tied, None)
    assert v.named_role == "readout" and "lacks its 1/m multiplier" in v.reason
