"""`mutransfer check`'s verdict (analysis/checkverdict.py) on synthetic slopes and drifts,
and the check file's sweep (commands/check_spec.py)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import yaml

from mutransfer.analysis.checkverdict import decide
from mutransfer.commands.check_plan import Budget, parse_budget
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
    wide = {"slope": -0.1, "ci_low": -0.6, "ci_high": 0.4}
    v = decide(judged(), COORD, BEHIND, wide, seeds=2, steps=60, widths=3)
    # half-width 0.5 must shrink below 0.25 - 0.1 = 0.15: (0.5 / 0.15)^2 x 2 seeds = 23
    assert v.verdict == "INCONCLUSIVE" and "about 23 seeds in all (now 2)" in v.advice[0]
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


def test_a_fractional_trial_steps_budget_is_refused_not_rounded_down():
    """10.5 trial-steps is no count of steps: refused as written (before, it ran as 10, and
    0.5 as a budget of 0); fractional minutes stay fine."""
    for text in ("10.5", "0.5"):
        with pytest.raises(UserError, match=rf"--budget {text}: .*whole number"):
            parse_budget(text)
    assert parse_budget("1.5m").minutes == 1.5


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


def test_the_transfer_stage_is_an_equivalence_test_against_the_tolerance():
    from mutransfer.analysis.checkverdict import equivalence, seeds_to_decide

    assert equivalence(-0.1, 0.2, 0.25) == "PASS"
    assert equivalence(-0.3, 0.2, 0.25) == "" and equivalence(0.3, 0.9, 0.25) == "FAIL"
    assert equivalence(float("nan"), 0.1, 0.25) == ""
    tight = {"slope": 0.0, "ci_low": -0.1, "ci_high": 0.1}
    assert decide(judged(), COORD, BEHIND, tight, tolerance=0.12).verdict == "PASS"
    assert decide(judged(), COORD, BEHIND, tight, tolerance=0.08).verdict == "INCONCLUSIVE"
    # half-width 0.3 at 2 seeds; a drift of 0 needs it below 0.1: 2 x 9 = 18 seeds
    assert seeds_to_decide(0.0, -0.3, 0.3, 0.1, 2) == 18
    assert seeds_to_decide(0.1, -0.2, 0.4, 0.1, 2) is None  # on the bound: never decided


def test_more_seeds_cannot_shrink_the_grids_placement_part_of_the_interval():
    from mutransfer.analysis.checkverdict import seeds_to_decide
    from mutransfer.analysis.tdist import t_quantile

    # the stored 64-512 Mamba run: drift -0.04, s.e. 0.046 from 2 seeds (df 4) and 0.028
    # placement; half-width 2.776 x 0.054 = 0.149, room 0.08
    half = t_quantile(0.95, 4) * np.hypot(0.046, 0.028)
    need = seeds_to_decide(-0.04, -0.04 - half, -0.04 + half, 0.12, 2, 0.046, 0.028, 4)
    def half_at(n):  # 4 df per pair of seeds (4 widths), the seeds' part as 1/sqrt(n)
        return t_quantile(0.95, 4 * (n - 1)) * np.hypot(0.046 * np.sqrt(2 / n), 0.028)

    assert need == 7 and half_at(7) <= 0.08 < half_at(6)
    # the placement part alone (1.96 x 0.045) is wider than the room: no number of seeds
    assert seeds_to_decide(-0.04, -0.2, 0.12, 0.12, 2, 0.046, 0.045, 4) is None
    # without the parts: the whole half-width shrinks as 1/sqrt(seeds), as before
    assert seeds_to_decide(0.0, -0.3, 0.3, 0.1, 2) == 18


def test_a_correct_models_drift_can_pass_the_widths_share_their_grids_placement(tmp_path):
    """Issue 29: every lr* carries a grid-placement term (0.2 octave on a one-octave grid);
    counted once per width, it alone kept the drift's 95% interval wider than ±0.12 over
    widths 64-512 (1.96 x 0.2 x sqrt(0.2) = 0.175), so no correct model could PASS, however
    many seeds. The widths share the grid: the slope carries one measured placement term."""
    import numpy as np

    from mutransfer.analysis import analyze
    from mutransfer.analysis.checkverdict import equivalence
    from mutransfer.analysis.drift import PLACEMENT_SD
    from tests.sweeps import LR_GRID, MUP
    from tests.synthetic_sweeps import synthetic_tables, write_results

    t = synthetic_tables([MUP], [64, 128, 256, 512], LR_GRID, list(range(8)), noise=0.002)
    d = analyze(write_results(tmp_path, t)).drift.iloc[0]
    assert d.se_placement == pytest.approx(PLACEMENT_SD * np.sqrt(0.2), rel=1e-6)
    assert d.se_seeds < d.se_placement  # 8 seeds, little noise: the placement term dominates
    assert equivalence(d.ci_low, d.ci_high, 0.12) == "PASS", (d.ci_low, d.ci_high)


def param_slopes(*off):
    """Per-parameter exponent rows (analysis/updates.py's columns) of two tensors, each at
    its expected exponent; `off`: (param, kind, step, slope) put elsewhere."""
    rows = []
    for name, role, init, update in (("blocks.0.fc.weight", "hidden", -0.5, -0.5),
                                     ("head.weight", "readout", 0.0, 0.0)):
        rows.append((name, role, "init", 0, init))
        rows += [(name, role, "update", t, update) for t in (1, 2)]
    df = pd.DataFrame(rows, columns=["quantity", "role", "kind", "step", "expected"])
    df = df.assign(parameterization="mup", layer=-1, slope=df["expected"], se=0.01, df=6.0)
    for name, kind, step, slope in off:
        sel = (df["quantity"] == name) & (df["kind"] == kind) & (df["step"] == step)
        df.loc[sel, "slope"] = slope
    return df.assign(excess=((df["slope"] - df["expected"]).abs() - 0.2).clip(lower=0))


def test_a_parameter_whose_own_exponent_is_off_is_named_before_any_activation():
    from mutransfer.analysis.checkverdict import judge_all

    acts = judged().drop(columns="status").assign(df=7.0)
    sl = judge_all(acts, param_slopes(), 0.2, 0.05)
    assert decide(sl, COORD, BEHIND, GOOD_DRIFT).verdict == "PASS"
    sl = judge_all(acts, param_slopes(("head.weight", "update", 1, -1.0),
                                      ("head.weight", "update", 2, -1.0)), 0.2, 0.05)
    order = {"blocks.0.fc.weight": 0, "head.weight": 1}
    v = decide(sl, COORD, BEHIND, GOOD_DRIFT, param_order=order)
    assert v.verdict == "FAIL" and v.culprit.params == {"head.weight": "readout"}
    assert "width^-1.00" in v.reason and "implies width^+0.00" in v.reason
    assert "LR (Adam) exponent is off by -1.00" in v.reason
    sl = judge_all(acts, param_slopes(("blocks.0.fc.weight", "init", 0, 0.0)), 0.2, 0.05)
    v = decide(sl, COORD, BEHIND, GOOD_DRIFT, param_order=order)
    assert v.culprit.label == "blocks.0.fc.weight@init" and "init exponent" in v.reason


def test_bad_tolerance_or_a_budget_below_one_seed_set_is_one_line_exit_2(tmp_path, capsys):
    from mutransfer.cli import main

    for i, check in enumerate(({"tolerance": 0}, {"seeds": [0, 1, 2], "budget": {"seeds": 2}},
                               {"budget": {"minutes": -1}})):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump({"name": "bad", "model": {"arch": "mamba"},
                                        "check": check}))
        out = tmp_path / f"out{i}"
        assert main(["check", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and not out.exists(), err


@pytest.mark.parametrize("check,named", [
    ({"lr": {"log2": [-3, -10]}}, "check.lr.log2: range upside down"),
    ({"lr": [0.1, -0.1, 0.2]}, "check.lr[1]: -0.1 is not a positive learning rate"),
    ({"search": {"window": 0}}, "check.search.window:"),
    ({"search": {"bogus": 1}}, "check.search.bogus:"),
])
def test_a_refusal_of_the_transfer_stage_names_the_check_files_fields(tmp_path, capsys, check,
                                                                      named):
    """The transfer stage is a sweep the check builds; its refusals used to name that sweep's
    fields ('sweep: axes.lr.log2'), which the user never wrote."""
    from mutransfer.cli import main

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "model": {"arch": "mamba", "n_layer": 1,
                                                           "base_width": 16},
                                    "check": {"widths": [16, 32], **check}}))
    assert main(["check", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: {named}"), err
    assert not (tmp_path / "out").exists()


def test_the_sequential_test_adds_one_seed_set_per_round_up_to_the_budget():
    spec = CheckSpec(name="c", check={"seeds": [0, 1], "budget": {"seeds": 7}})
    assert spec.check.seed_rounds() == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]]


def test_rounds_stop_as_soon_as_the_interval_decides_or_the_budget_would_not_hold(
        tmp_path, monkeypatch):
    import mutransfer.commands.check as check

    # the drift's interval narrows as 1/√seeds around -0.01: inside ±0.25 at 6 seeds (± 0.23)
    def fake_round(spec, out, seeds, deadline, num_cpus):
        half = 0.4 * (2 / len(seeds)) ** 0.5
        calls.append(list(seeds))
        return ({"slope": -0.01, "ci_low": -0.01 - half, "ci_high": -0.01 + half}, False,
                (10 * len(calls), 1.0))

    monkeypatch.setattr(check, "_transfer_round", fake_round)
    spec = CheckSpec(name="c", check={"seeds": [0, 1], "budget": {"seeds": 8},
                                      "tolerance": 0.25})
    steps = 60  # per trial
    calls = []
    r = check._transfer_stage(spec, tmp_path, steps, Budget(), None, time.time(), 0)
    assert calls == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4, 5]] and r.rounds == 3
    assert not r.stopped and r.seeds == [0, 1, 2, 3, 4, 5]
    # 1,000 trial-steps hold the first round (10 trials x 60 steps) but not a second
    calls = []
    r = check._transfer_stage(spec, tmp_path, steps, Budget(steps=1000), None, time.time(),
                              0)
    assert calls == [[0, 1]] and r.stopped == "1,000 trial-steps" and r.rounds == 1
    calls = []
    small = CheckSpec(name="c", check={"seeds": [0, 1], "budget": {"seeds": 4}})
    r = check._transfer_stage(small, tmp_path, steps, Budget(), None, time.time(), 0)
    assert len(calls) == 2 and r.stopped == "4 seeds"


def test_a_deadline_that_fires_as_the_round_ends_is_a_budget_stop_not_a_traceback(
        tmp_path, monkeypatch):
    """The budget's timer interrupts the main thread; if it fires while the finished round
    cancels it, the interrupt lands in that cancel. Before, the cancel sat in a `finally`
    after the `except KeyboardInterrupt`, so the interrupt escaped `check` as a traceback."""
    import _thread
    import signal
    import types

    import mutransfer.commands.check as check
    from mutransfer.sweep.run import driver

    class LateTimer:
        """A timer that fires exactly while it is being cancelled."""

        def __init__(self, *args):
            self.daemon = False

        def start(self):
            pass

        def cancel(self):
            _thread.interrupt_main()
            time.sleep(0.05)  # the main thread takes the interrupt here

    monkeypatch.setattr(check.threading, "Timer", LateTimer)
    monkeypatch.setattr(driver, "run", lambda *a, **k: types.SimpleNamespace(interrupted=False))
    spec = CheckSpec(name="c", check={"seeds": [0, 1]})
    # Python's own SIGINT handler, as `mutransfer check` runs under (a test before this one
    # in the same process may have left another, under which interrupt_main does nothing)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = check._transfer_round(spec, tmp_path, [0, 1], time.time() + 60, None)
    except KeyboardInterrupt:
        pytest.fail("the deadline's interrupt escaped the round")
    finally:
        signal.signal(signal.SIGINT, before)
    assert result == (None, True, (0, 0.0))  # stopped by the budget: the verdict says so


def test_no_pass_while_the_coordinate_stage_leaves_a_slope_undecided():
    """`coord-check` says INCONCLUSIVE for a borderline slope beyond twice its band (or with
    no standard error: a coordinate stage of two seeds at two widths); the check said PASS
    there once the drift was inside."""
    far = judged().assign(excess=0.0)
    sel = (far["quantity"] == "blocks.0.fc") & (far["step"] == 1) & (far["kind"] == "dh")
    far.loc[sel, ["slope", "se", "excess", "status"]] = [0.9, 0.5, 0.65, "borderline"]
    v = decide(far, COORD, BEHIND, GOOD_DRIFT, coord_tolerance=0.25)
    assert v.verdict == "INCONCLUSIVE" and "could not decide 1 slope" in v.reason
    assert "Δblocks.0.fc@t1 +0.90 ± 0.50" in v.reason and "check.coord seeds" in v.advice[-1]
    near = far.assign(excess=np.where(sel, 0.1, 0.0))  # outside by less than its band: PASS
    assert decide(near, COORD, BEHIND, GOOD_DRIFT, coord_tolerance=0.25).verdict == "PASS"
    assert decide(far, COORD, BEHIND, GOOD_DRIFT).verdict == "PASS"  # not judged so
