"""The notes and text columns of a linear target's tables (a weight decay whose grid holds 0)
speak its own units, as the number columns beside them do (analysis/units.py): the fit holds
2^(value / step) in the LR's role, and a note that writes that role reads "2^2" for 0.1.
An LR analysis keeps its notes word for word."""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, summary_table
from mutransfer.results.store import Tables
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

GRID = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4]
LRS = [2.0**k for k in range(-12, -3)]
CURVATURE = 20.0  # nats per unit^2 of the weight decay, planted


def _drop(tables: Tables, col: str, cells: dict[int, float]) -> Tables:
    """The tables without the trials at value `cells[width]` of `col` (a window: not run)."""
    tr = tables.trials
    gone = np.zeros(len(tr), bool)
    for width, value in cells.items():
        gone |= (tr["width"] == width).to_numpy() & np.isclose(tr[col], value)
    return Tables(tr[~gone].reset_index(drop=True), tables.steps)


def _linear(tmp_path, not_run: dict[int, float], points: dict | None = None):
    t = axes_tables(points or {"width": [64, 128, 256]}, "train.weight_decay", GRID,
                    lambda p: 0.1 + 0.05 * np.log2(p["width"] / 64), [0, 1, 2], log=False,
                    curvature=CURVATURE, fixed={"lr": 1e-3})
    root = write_results(tmp_path, _drop(t, "train.weight_decay", not_run))
    return analyze(root, target="train.weight_decay")


def _by_width(df: pd.DataFrame) -> dict[int, pd.Series]:
    return {int(r["width"]): r for _, r in df.iterrows()}


def test_a_linear_targets_values_not_run_are_listed_in_its_own_units(tmp_path):
    opt = _by_width(_linear(tmp_path, {128: 0.0, 256: 0.1}).lr_opt)
    assert opt[128]["lrs_not_run"] == "0"       # not 2^0
    assert opt[256]["lrs_not_run"] == "0.1"     # not 2^2
    assert opt[256]["note"] == "not run at this width: 0.1"


def test_a_linear_targets_run_of_values_not_run_is_a_range_in_its_own_units(tmp_path):
    t = axes_tables({"width": [64, 128]}, "train.weight_decay", GRID,
                    lambda p: 0.2, [0, 1], log=False, curvature=CURVATURE, fixed={"lr": 1e-3})
    tr = t.trials
    gone = (tr["width"] == 128) & (tr["train.weight_decay"] <= 0.1 + 1e-9)
    root = write_results(tmp_path, Tables(tr[~gone].reset_index(drop=True), t.steps))
    row = _by_width(analyze(root, target="train.weight_decay").lr_opt)[128]
    assert row["lrs_not_run"] == "0..0.1"


def test_the_regret_note_of_a_linear_target_names_values_and_distance_in_its_units(tmp_path):
    a = _linear(tmp_path, {256: 0.1})
    row = _by_width(a.regret)[256]
    assert (row["lr_nearest"], row["lr_used"]) == pytest.approx((0.1, 0.15))
    gap = row["lr_gap_log2"]  # already in the target's units: ~0.049
    assert row["note"] == (f"0.1 (nearest to lr*) not run at this width; used 0.15, "
                           f"{gap:.3g} from lr*")


def test_the_scale_regret_note_of_a_linear_target_is_in_its_units(tmp_path):
    a = _linear(tmp_path, {256: 0.1})
    row = _by_width(a.scale_regret[a.scale_regret["scale"] == "width"])[256]
    assert row["note"].startswith("0.1 (nearest to lr*) not run at this width; used 0.15, ")
    assert "octave" not in row["note"] and "2^" not in row["note"]


def test_a_linear_targets_curvature_is_in_nats_per_unit_squared(tmp_path):
    """The planted bowl, 20 nats per unit^2, comes back as 20 whatever the grid's step."""
    a = _linear(tmp_path, {})
    np.testing.assert_allclose(a.lr_opt["curvature"], CURVATURE, rtol=0.05)


def test_an_lr_analysis_keeps_its_notes_in_lrs_and_octaves(tmp_path):
    t = axes_tables({"width": [64, 128, 256]}, "lr", LRS,
                    lambda p: 2.0**-8 * (p["width"] / 64) ** -0.5, [0, 1, 2])
    root = write_results(tmp_path, _drop(t, "lr", {128: 2.0**-12, 256: 2.0**-8}))
    a = analyze(root)
    opt, regret = _by_width(a.lr_opt), _by_width(a.regret)
    assert opt[128]["lrs_not_run"] == "2^-12"
    assert opt[256]["note"] == "not run at this width: 2^-8"
    gap = regret[256]["lr_gap_log2"]
    assert regret[256]["note"] == (f"2^-8 (nearest to lr*) not run at this width; used "
                                   f"{'2^-9' if regret[256]['lr_used'] < 2.0**-8 else '2^-7'}, "
                                   f"{gap:.2f} octaves from lr*")


def test_the_scale_drifts_scale_columns_are_nullable_whole_numbers(tmp_path):
    """Null on the rows of the axis itself, the other axis's value elsewhere (not 64.0)."""
    t = axes_tables({"width": [64, 128], "model.n_layer": [2, 4]}, "train.weight_decay",
                    GRID, lambda p: 0.15, [0, 1], log=False, curvature=CURVATURE,
                    fixed={"lr": 1e-3})
    a = analyze(write_results(tmp_path, t), target="train.weight_decay",
                scale=["width", "model.n_layer"])
    d = a.stored_tables()["scale_drift"]
    for col in ("width", "model.n_layer"):
        assert str(d[col].dtype) == "Int64"
        own = d["scale"] == col
        assert d.loc[own, col].isna().all()
        assert set(d.loc[~own, col]) == ({64, 128} if col == "width" else {2, 4})


def test_the_scale_drift_of_one_scale_axis_has_an_int64_column_for_it(tmp_path):
    a = _linear(tmp_path, {})
    assert str(a.scale_drift["width"].dtype) == "Int64"
    assert a.scale_drift["width"].isna().all()


def test_the_summary_of_a_linear_target_whose_zero_was_not_run_somewhere_is_printed(tmp_path):
    """A sweep prints it at its end: listing the value 0 as an LR took log2(0) and raised."""
    text = summary_table(_linear(tmp_path, {128: 0.0}))
    assert "width 128: not run 0" in text


def test_the_summary_lists_a_linear_targets_values_not_run_in_its_own_units(tmp_path):
    """0.25 was listed as 2^-2 (the summary's values are converted; it wrote them as LRs)."""
    text = summary_table(_linear(tmp_path, {256: 0.25}))
    assert "width 256: not run 0.25" in text, text
