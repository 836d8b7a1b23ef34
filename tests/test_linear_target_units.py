"""A linear target's tables (a weight decay whose grid holds 0) are in the target's own units in
every column (analysis/units.py), not only in some: the fit runs in grid steps (2^(value /
step) in the LR's role), and a column left in those units reads 20x off for a step of 0.05."""

import numpy as np
import pytest

from mutransfer.analysis import analyze
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

GRID = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]
FIRST_DIVERGED = {64: 0.35, 128: 0.3, 256: 0.25}  # every seed diverges from here up


def _store(tmp_path, spike_at: float | None = None):
    t = axes_tables({"width": [64, 128, 256]}, "train.weight_decay", GRID,
                    lambda p: 0.1 + 0.05 * np.log2(p["width"] / 64), [0, 1, 2], log=False,
                    curvature=20.0, fixed={"lr": 1e-3})
    tr = t.trials
    wd = tr["train.weight_decay"]
    div = wd >= tr["width"].map(FIRST_DIVERGED) - 1e-9
    tr.loc[div, ["status", "diverged", "final_eval_loss", "best_eval_loss"]] = \
        ["diverged", True, None, None]
    if spike_at is not None:  # trained, yet above the divergence bound on the way
        tr["steps_above_bound"] = np.where(np.isclose(wd, spike_at) & ~div, 3, 0)
        tr["max_excursion"] = np.where(np.isclose(wd, spike_at) & ~div, 1.5, 0.1)
    return write_results(tmp_path, t)


def test_smallest_unstable_value_is_in_the_targets_units(tmp_path):
    a = analyze(_store(tmp_path, spike_at=0.2), target="train.weight_decay")
    st = a.stability.sort_values("width")
    np.testing.assert_allclose(st["largest_trained"], [0.3, 0.25, 0.2])
    np.testing.assert_allclose(st["smallest_unstable"], [0.2, 0.2, 0.2])  # not 2^(0.2 / 0.05)


def test_stability_slope_brackets_and_scatter_are_in_the_targets_units(tmp_path):
    """The feasible slopes lie inside the interval that is their hull, in the same units."""
    row = analyze(_store(tmp_path), target="train.weight_decay").stability_slope.iloc[0]
    assert row["slope"] == pytest.approx(-0.05)
    # brackets 0.05 wide two doublings apart: every line through them, -0.075 .. -0.025
    assert (row["feasible_low"], row["feasible_high"]) == pytest.approx((-0.075, -0.025))
    assert row["ci_low"] <= row["feasible_low"] and row["feasible_high"] <= row["ci_high"]
    assert row["scatter"] == pytest.approx(0.0)


def test_drift_standard_error_parts_add_up_to_its_standard_error(tmp_path):
    t = axes_tables({"width": [64, 128, 256]}, "train.weight_decay", GRID[:7],
                    lambda p: 0.1 + 0.05 * np.log2(p["width"] / 64), [0, 1, 2], log=False,
                    curvature=20.0, fixed={"lr": 1e-3})
    a = analyze(write_results(tmp_path, t), target="train.weight_decay")
    row = a.drift.iloc[0]
    assert np.isfinite(row["se"])
    assert np.hypot(row["se_seeds"], row["se_placement"]) == pytest.approx(row["se"])
