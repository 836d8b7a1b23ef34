"""The stability slope from brackets (analysis/brackets.py): each width's boundary lies between
its largest trained and smallest diverged LR, so three widths with one-octave brackets must not
give a zero-width interval (issue 19.6: the OLS one through the midpoints did)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis.brackets import bracket_slope, feasible_slopes
from mutransfer.analysis.cells import DIVERGED, PARTIAL, TRAINED
from mutransfer.analysis.stability import stability_slope_table, stability_table

X3 = np.array([6.0, 7.0, 8.0])  # widths 64, 128, 256


def test_feasible_slopes_of_three_one_octave_brackets_on_a_level_line():
    lo, hi = np.full(3, -4.0), np.full(3, -3.0)
    assert feasible_slopes(X3, lo, hi) == (-0.5, 0.5)


def test_feasible_slopes_are_empty_when_no_line_passes_through_every_bracket():
    lo, hi = np.array([-4.0, -1.0, -4.0]), np.array([-3.0, 0.0, -3.0])
    assert all(np.isnan(feasible_slopes(X3, lo, hi)))


def stability_rows(lo: list[float], hi: list[float], widths=(64, 128, 256)) -> pd.DataFrame:
    """The stability table of one family: boundary brackets [2^lo, 2^hi] per width."""
    lo_lr, hi_lr = 2.0 ** np.array(lo), 2.0 ** np.array(hi)
    return pd.DataFrame({"parameterization": "sp", "width": list(widths),
                         "largest_trained": lo_lr, "smallest_any_diverged": hi_lr,
                         "boundary": np.sqrt(lo_lr * hi_lr), "clean": True,
                         "boundary_all": np.sqrt(lo_lr * hi_lr), "clean_all": True})


def test_three_widths_with_one_octave_brackets_give_a_slope_interval_of_honest_width():
    """The quickstart's sp case: brackets one octave wide, halving per doubling of width."""
    st = stability_rows([-4, -5, -6], [-3, -4, -5])
    row = stability_slope_table(st, ["parameterization"]).iloc[0]
    assert row["slope"] == pytest.approx(-1.0)
    assert row["ols_high"] - row["ols_low"] == pytest.approx(0.0, abs=1e-9)  # the old answer
    assert row["ci_low"] <= -1.5 + 1e-9 and row["ci_high"] >= -0.5 - 1e-9
    assert (row["feasible_low"], row["feasible_high"]) == pytest.approx((-1.5, -0.5))
    assert row["ci_high"] - row["ci_low"] < 2.0


def test_two_widths_give_the_slopes_through_both_brackets():
    b = bracket_slope(np.array([6.0, 7.0]), np.array([-4.0, -5.0]), np.array([-3.0, -4.0]))
    assert (b.feasible_low, b.feasible_high) == pytest.approx((-2.0, 0.0))
    assert b.ci_low <= -2.0 and b.ci_high >= 0.0 and "two widths" in b.note


@pytest.mark.parametrize("scatter,floor", [(0.0, 1.0), (0.15, 0.9)])
def test_planted_boundaries_on_an_octave_grid_are_covered(scatter, floor):
    """Boundaries on a line of random slope (plus scatter), read through an octave grid at a
    random offset at three widths: the interval holds the true slope (always, without
    scatter: the true line passes through every bracket)."""
    rng = np.random.default_rng(7)
    hits, widths = [], []
    for _ in range(300):
        slope, offset = rng.uniform(-1.5, 0.5), rng.uniform(0, 1)
        y = -4.0 + slope * (X3 - 6) + rng.normal(0, scatter, 3)
        lo = np.floor(y - offset) + offset
        b = bracket_slope(X3, lo, lo + 1)
        hits.append(b.ci_low <= slope <= b.ci_high)
        widths.append(b.ci_high - b.ci_low)
    assert np.mean(hits) >= floor
    assert np.median(widths) > 0.5  # about +-0.5, not zero


def test_a_seed_that_diverged_far_below_the_boundary_leaves_its_width_out_of_the_slope():
    """Width 64: one seed diverged at the lowest LR, every seed trained up to 2^-4. Its
    bracket's ends are reversed (trained up to 2^-4, a seed diverged at 2^-9): no line passes
    through it. Before, it entered the slope as the geometric mean of the reversed ends and
    turned the family's -1.0 (128 -> 256) into +2.0; now it is left out, and the note says
    why."""
    lrs = [2.0**e for e in (-9, -8, -7, -6, -5, -4, -3)]
    tops = {64: [PARTIAL] + [TRAINED] * 5 + [DIVERGED],
            128: [TRAINED] * 5 + [DIVERGED] * 2, 256: [TRAINED] * 4 + [DIVERGED] * 3}
    cells = pd.DataFrame([{"parameterization": "sp", "width": w, "lr": lr, "status": st}
                          for w, sts in tops.items() for lr, st in zip(lrs, sts)])
    stab = stability_table(cells, ["parameterization", "width"])
    assert not stab.set_index("width").loc[64, "clean"]
    row = stability_slope_table(stab, ["parameterization"]).iloc[0]
    assert row["widths"] == "128,256" and row["slope"] == pytest.approx(-1.0)
    assert "left out: width 64 (ambiguous" in row["note"]


def test_unstable_but_trained_is_reported_apart_from_diverged():
    cells = pd.DataFrame({"parameterization": "sp", "width": 64,
                          "lr": [2.0**-6, 2.0**-5, 2.0**-4, 2.0**-3],
                          "status": [TRAINED, TRAINED, TRAINED, DIVERGED]})
    trials = pd.DataFrame({"parameterization": "sp", "width": 64,
                           "lr": [2.0**-6, 2.0**-5, 2.0**-4, 2.0**-3],
                           "diverged": [False, False, False, True],
                           "steps_above_bound": [0, 3, 7, 12],
                           "max_excursion": [0.2, 1.4, 2.5, 9.0]})
    row = stability_table(cells, ["parameterization", "width"], trials).iloc[0]
    assert row["largest_trained"] == 2.0**-4 and row["smallest_any_diverged"] == 2.0**-3
    assert row["smallest_unstable"] == 2.0**-5 and row["n_lrs_unstable"] == 2
    assert row["max_excursion"] == 2.5  # the diverged trial's spike is not a trained one's
    old = stability_table(cells, ["parameterization", "width"],
                          trials.drop(columns=["steps_above_bound", "max_excursion"])).iloc[0]
    assert np.isnan(old["smallest_unstable"]) and np.isnan(old["n_lrs_unstable"])


def test_the_analysis_reports_unstable_but_trained_and_the_bracket_interval(tmp_path):
    """End to end from a results folder: trials that spiked and recovered (complete, with
    steps_above_bound > 0) appear in the stability table apart from the diverged ones, and
    the slope's interval is the brackets' (planted: boundary halves per doubling of width)."""
    from mutransfer.analysis import analyze
    from mutransfer.analysis.render import stability_sections
    from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

    p = Planted("sp", 2.0**-9, -1.0, stable_base=2.0**-4.5, stable_exponent=-1.0)
    grid = [2.0**k for k in range(-12, -2)]
    t = synthetic_tables([p], [64, 128, 256], grid, [0, 1], noise=0.0)
    trials = t.trials
    below = trials["lr"] * trials["width"] / 64 == 2.0**-5  # one octave under the boundary
    trials["steps_above_bound"] = np.where(below, 6, 0)
    trials["max_excursion"] = np.where(below, 2.5, 0.3)
    a = analyze(write_results(tmp_path, t))
    st = a.stability.set_index("width")
    for w in (64, 128, 256):
        assert st.loc[w, "smallest_unstable"] == pytest.approx(2.0**-5 * 64 / w)
        assert st.loc[w, "n_lrs_unstable"] == 1 and st.loc[w, "max_excursion"] == 2.5
        assert st.loc[w, "largest_trained"] == pytest.approx(2.0**-5 * 64 / w)
    slope = a.stability_slope.iloc[0]
    assert slope["slope"] == pytest.approx(-1.0)
    assert slope["ci_low"] < -1.4 and slope["ci_high"] > -0.6
    text = "\n".join(s.view.to_string() for s in stability_sections(a))
    assert "unstable but trained from" in text and "lines through brackets" in text
