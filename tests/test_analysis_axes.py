"""Any target hyperparameter against any scale axes (analysis/choice.py), and one law across
them (analysis/law.py), on stores with planted optima (tests/synthetic_axes.py)."""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, full_text, make_plots, write_analysis
from mutransfer.analysis.law import law_tables
from mutransfer.cli import main
from tests.synthetic_axes import BATCH, SEQ, axes_tables
from tests.synthetic_sweeps import write_results

LR_GRID = [2.0**e for e in np.arange(-14, -3.9, 0.5)]
B_WIDTH, B_DEPTH, B_TOKENS = -1.0, -0.5, -0.32


def lr_law(p: dict) -> float:
    return 2**-8 * (p["width"] / 64) ** B_WIDTH * (p["model.n_layer"] / 2) ** B_DEPTH


@pytest.fixture(scope="module")
def depth_store(tmp_path_factory):
    t = axes_tables({"width": [64, 128, 256, 512], "model.n_layer": [2, 4, 8]}, "lr", LR_GRID,
                    lr_law, [0, 1, 2])
    return write_results(tmp_path_factory.mktemp("depth"), t)


@pytest.fixture(scope="module")
def depth(depth_store):
    return analyze(depth_store)


def test_depth_is_a_default_scale_axis_and_the_law_recovers_the_planted_exponents(depth):
    assert depth.choice.scale == ("width", "model.n_layer")
    coef = depth.law.coef.set_index("term")
    for term, truth in (("width", B_WIDTH), ("model.n_layer", B_DEPTH),
                        ("intercept", -8 + 6 - B_DEPTH * 1)):
        lo, est, hi = coef.loc[term, ["ci_low", "estimate", "ci_high"]]
        assert lo < truth < hi, (term, lo, est, hi)
        # each optimum also carries where a one-octave grid sits (intervals.GRID_SD)
        assert hi - lo < 1.0
    assert (coef["method"] == "wls").all() and (coef["n_points"] == 12).all()
    # the noise is pooled over all 12 scale points: 12 x (3 seeds - 1) df
    assert (coef["df"] == 24).all()
    # the residuals are the law's: measured - predicted, one row per optimum
    pts = depth.law.points
    assert len(pts) == 12 and np.abs(pts["residual"]).max() < 0.3


def test_drift_per_doubling_of_each_scale_axis(depth):
    d = depth.scale_drift
    for axis, truth, n in (("width", B_WIDTH, 3), ("model.n_layer", B_DEPTH, 4)):
        rows = d[d["scale"] == axis]
        assert len(rows) == n  # one line per value of the other scale axis
        assert (rows["ci_low"] < truth).all() and (truth < rows["ci_high"]).all()
        assert np.allclose(rows["slope"], truth, atol=0.15)


def test_held_out_check_misses_by_little_and_its_interval_covers_zero(depth):
    h = depth.law.holdout.set_index("held_out")
    assert list(h.index) == ["largest width", "largest model.n_layer", "all"]
    assert h.loc["largest width", "n_fit"] == 9 and h.loc["largest width", "n_held"] == 3
    assert h.loc["all", "n_fit"] == 6 and h.loc["all", "n_held"] == 1  # the corner 512 x 8
    assert (h["ci_low"] < 0).all() and (0 < h["ci_high"]).all()
    assert (h["miss"].abs() < 0.3).all()


@pytest.mark.slow  # the figures: ~20 s on a loaded machine
def test_tables_and_report_follow_the_choice(depth, depth_store, tmp_path):
    text = full_text(depth)
    assert "Drift of lr* per doubling of each scale axis" in text
    assert "One law: log2 lr* = a + sum_i b_i log2(scale_i)" in text
    assert "The law's held-out check" in text
    paths = write_analysis(depth, tmp_path / "a")
    names = {p.name for p in paths}
    assert {"law.parquet", "law_holdout.parquet", "law_points.csv",
            "scale_drift.parquet", "scale_regret.parquet"} <= names
    figs = make_plots(depth_store, analysis=depth, out_dir=tmp_path / "p")
    assert {p.name for p in figs} >= {"optimum_vs_scale.png", "law.png", "report.html"}
    report = (tmp_path / "p" / "report.html").read_text()
    assert "One law" in report and "optimum of lr against model.n_layer" not in report


def test_only_depth_as_scale_puts_width_among_the_families(depth_store, tmp_path):
    a = analyze(depth_store, scale=["model.n_layer"])
    assert a.choice.scale == ("model.n_layer",)
    assert a.law.coef.empty  # one scale axis: its drift is the law
    d = a.drift  # the main tables: n_layer in the width role, width a family axis
    assert sorted(d["d_model"]) == [64, 128, 256, 512]
    assert np.allclose(d["slope"], B_DEPTH, atol=0.15)
    stored = a.stored_tables()["drift"]
    assert "width" in stored and "model.n_layer" not in stored  # drift: per family of width
    # the values the slope ran over are n_layer's, and the stored columns say so
    for stem in ("drift", "stability_slope", "monotonicity"):
        cols = set(a.stored_tables()[stem].columns)
        assert {"model.n_layer_values", "n_model.n_layer_values"} <= cols, stem
        assert not {"widths", "n_widths"} & cols, stem
    lr_opt = a.stored_tables()["lr_opt"]
    assert {"model.n_layer", "width"} <= set(lr_opt.columns) and "d_model" not in lr_opt
    assert "model.n_layer" in full_text(a).splitlines()[0]


def test_another_target_decoupled_lr_like(tmp_path):
    """A decoupled_lr-like store: ssm_B.lr_mult swept with the LR, optimum planted at
    2 x (steps / 100)^-0.32 whatever the width; the LR becomes a family axis."""
    target = "param.overrides.ssm_B.lr_mult"
    grid = [2.0**e for e in np.arange(-3, 5.1, 0.5)]
    t = axes_tables({"width": [64, 256], "lr": [1e-3, 2e-3]}, target, grid,
                    lambda p: 2.0 * (p["width"] / 64) ** 0.0, [0, 1, 2],
                    fixed={"param.overrides.ssm_C.lr_mult": 1.0})
    root = write_results(tmp_path, t)
    a = analyze(root, target=target)
    assert a.choice.log and a.choice.scale == ("width",)
    assert "train.lr" in a.axes
    assert np.allclose(np.log2(a.lr_opt["lr_opt"]), 1.0, atol=0.3)
    assert (a.lr_opt["ci_low"] < 2.0).all() and (2.0 < a.lr_opt["ci_high"]).all()
    stored = a.stored_tables()
    assert (stored["lr_opt"]["target"] == target).all() and "optimum" in stored["lr_opt"]
    assert target in stored["cells"] and "train.lr" in stored["cells"]
    assert "Optimal ssm_B.lr_mult" in full_text(a)


def test_training_tokens_as_a_scale_axis(tmp_path):
    """Issue 21: lr* per (width, length), drift per doubling of tokens, the regret of the
    shortest length's lr* at the longest, and a plot against tokens."""
    steps = [100, 200, 400, 800]
    t = axes_tables({"width": [64, 256], "train.steps": steps}, "lr", LR_GRID,
                    lambda p: 2**-8 * (p["train.steps"] / 100) ** B_TOKENS, [0, 1, 2])
    root = write_results(tmp_path, t)
    a = analyze(root)
    assert a.choice.scale == ("width", "tokens")
    assert sorted(a.lr_opt["tokens"].unique()) == [s * BATCH * SEQ for s in steps]
    d = a.scale_drift[a.scale_drift["scale"] == "tokens"]
    assert len(d) == 2
    assert (d["ci_low"] < B_TOKENS).all() and (B_TOKENS < d["ci_high"]).all()
    r = a.scale_regret[a.scale_regret["scale"] == "tokens"]
    longest = r[r["tokens"] == 800 * BATCH * SEQ]
    assert len(longest) == 2 and (longest["regret"] > 0).all()  # ~1 octave off: it costs
    coef = a.law.coef.set_index("term")
    assert coef.loc["tokens", "ci_low"] < B_TOKENS < coef.loc["tokens", "ci_high"]
    assert "Drift of lr* per doubling of each scale axis" in full_text(a)


def test_linear_target_with_zero(tmp_path):
    """train.weight_decay with 0 in its grid: fitted linearly, in its own units."""
    grid = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    t = axes_tables({"width": [64, 128, 256]}, "train.weight_decay", grid,
                    lambda p: 0.1 + 0.05 * np.log2(p["width"] / 64), [0, 1, 2], log=False,
                    curvature=20.0, fixed={"lr": 1e-3})
    root = write_results(tmp_path, t)
    a = analyze(root, target="train.weight_decay")
    assert not a.choice.log and a.choice.step == pytest.approx(0.05)
    np.testing.assert_allclose(a.lr_opt["lr_opt"], [0.1, 0.15, 0.2], atol=0.02)
    assert set(a.cells["lr"]) == set(grid)  # the cells in the target's units
    lo, slope, hi = a.drift.iloc[0][["ci_low", "slope", "ci_high"]]
    assert lo < 0.05 < hi and slope == pytest.approx(0.05, abs=0.015)  # units per doubling


@pytest.mark.slow  # the figures
def test_linear_target_figures(tmp_path):
    grid = [0.0, 0.1, 0.2, 0.3]
    t = axes_tables({"width": [64, 128]}, "train.weight_decay", grid, lambda p: 0.15,
                    [0, 1], log=False, curvature=20.0, fixed={"lr": 1e-3})
    root = write_results(tmp_path, t)
    figs = make_plots(root, out_dir=tmp_path / "p", analysis=analyze(
        root, target="train.weight_decay"))
    names = {p.name for p in figs}
    assert "optimum_vs_scale.png" in names and "lr_opt_vs_width.png" not in names


def test_sweep_file_section_is_read(depth_store, tmp_path):
    t = pd.read_parquet(depth_store / "trials")
    root = write_results(tmp_path / "s", type("T", (), {"trials": t, "steps": pd.DataFrame()}))
    (root / "sweep.yaml").write_text("name: x\nanalysis: {scale: [model.n_layer]}\n")
    a = analyze(root)
    assert a.choice.scale == ("model.n_layer",) and a.choice.sources == {
        "scale": "sweep file"}
    assert analyze(root, scale=["width"]).choice.scale == ("width",)  # the command line wins


@pytest.mark.parametrize("args, field", [
    (["--target", "train.nope"], "--target train.nope: not a swept numeric axis"),
    (["--target", "seed"], "--target seed: not a swept numeric axis"),
    (["--target", "width"], "--target width: is a scale axis"),
    (["--scale", "width", "train.steps"], "--scale train.steps: not a column"),
    (["--scale", "model.n_layer"], "--scale model.n_layer: not a column"),
])
def test_bad_choice_is_one_line_exit_2_nothing_written(tmp_path, capsys, args, field):
    t = axes_tables({"width": [64, 128]}, "lr", LR_GRID[::2], lr_law_width, [0])
    root = write_results(tmp_path, t)
    for command in ("analyze", "plot"):
        assert main([command, str(root), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and field in err, err
    assert not (root / "analysis").exists()


def lr_law_width(p: dict) -> float:
    return 2**-8 * (p["width"] / 64) ** -1.0


def test_scale_axis_that_does_not_vary_and_bad_section(tmp_path, capsys):
    t = axes_tables({"width": [64, 128], "model.n_layer": [2]}, "lr", LR_GRID[::2],
                    lr_law, [0])
    root = write_results(tmp_path, t)
    assert main(["analyze", str(root), "--scale", "width", "model.n_layer"]) == 2
    err = capsys.readouterr().err
    assert "--scale model.n_layer: does not vary in this sweep (one value: 2)" in err
    assert main(["analyze", str(root), "--target", "model.n_layer"]) == 2
    assert "--target model.n_layer: does not vary" in capsys.readouterr().err
    (root / "sweep.yaml").write_text("name: x\nanalysis: {scale: [], bogus: 1}\n")
    assert main(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "analysis.scale" in err
    assert not (root / "analysis").exists()


def test_law_with_fewer_points_than_parameters_is_a_no_fit_row():
    lr_opt = pd.DataFrame({"parameterization": ["mup", "mup"], "width": [64, 128],
                           "model.n_layer": [2, 4], "lr_opt": [1e-3, 5e-4],
                           "se_log2": [0.1, 0.1], "ci_df": [4, 4], "edge": [False, False]})
    law = law_tables(lr_opt, ["parameterization"], ["width", "model.n_layer"],
                     ["width", "model.n_layer"])
    assert (law.coef["note"] == "no fit: 2 points for 3 parameters").all()
    assert law.coef["estimate"].isna().all()
    one = law_tables(lr_opt.iloc[:1], ["parameterization"], ["width", "model.n_layer"],
                     ["width", "model.n_layer"])
    assert (one.coef["note"] == "no fit: 1 point for 3 parameters").all()  # not "1 points"
    assert law.points["log2_law"].isna().all()
    assert (law.holdout["note"].str.startswith("no fit")).all()


def test_two_scale_axes_and_one_lr_give_a_report_with_no_held_out_check(tmp_path):
    """One LR a point: no optimum anywhere, so the law has rows saying why and nothing to
    hold out. Before, the report's held-out section read columns of an empty table and
    analyze ended in a KeyError."""
    t = axes_tables({"width": [64, 128], "model.n_layer": [2, 4]}, "lr", [1e-3], lr_law, [0])
    a = analyze(write_results(tmp_path, t))
    assert a.law.holdout.empty and "held-out check" not in full_text(a)
    assert main(["analyze", str(tmp_path), "--out", str(tmp_path / "an")]) == 0


def test_sweep_file_section_is_checked_against_its_axes(tmp_path):
    from mutransfer.errors import UserError
    from mutransfer.sweep.plan.cells import load_plan

    body = "name: t\naxes: {width: [64, 128], lr: [0.001, 0.002], model.n_layer: [2, 4]}\n"
    ok = tmp_path / "ok.yaml"
    ok.write_text(body + "analysis: {target: lr, scale: [width, model.n_layer]}\n")
    assert load_plan(ok).spec.analysis.scale == ["width", "model.n_layer"]
    for section, field in (("{scale: [width, train.steps]}", "analysis.scale: train.steps"),
                           ("{target: model.bogus}", "analysis.target: model.bogus"),
                           ("{scale: [width], extra: 1}", "analysis.extra")):
        bad = tmp_path / "bad.yaml"
        bad.write_text(body + f"analysis: {section}\n")
        with pytest.raises(UserError, match=field.replace(".", r"\.")):
            load_plan(bad)


def test_a_depth_sweep_at_one_width_has_depth_as_its_scale_axis(tmp_path):
    # sweeps/depth.yaml's shape: one width, n_layer varies; width is no scale axis then (it
    # would only give "needs two widths" rows and a law with no fit)
    t = axes_tables({"width": [64], "model.n_layer": [1, 2, 4, 8]}, "lr", LR_GRID,
                    lambda p: 2**-8 * (p["model.n_layer"] / 2) ** B_DEPTH, [0, 1, 2])
    a = analyze(write_results(tmp_path, t))
    assert a.choice.scale == ("model.n_layer",)
    (row,) = a.drift.itertuples()
    assert row.ci_low < B_DEPTH < row.ci_high
    assert a.law.coef.empty or (a.law.coef["method"] != "wls").all()


def test_a_scale_axis_drift_has_the_width_drifts_interval(depth):
    # both tables count the seeds' noise per point and the grid's placement once per slope
    # (analysis/drift.py); the scale table once counted the placement at every point
    by_width = depth.scale_drift[depth.scale_drift["scale"] == "width"]
    merged = by_width.merge(depth.drift, on=["parameterization", "model.n_layer"],
                            suffixes=("", "_w"))
    assert len(merged) == 3
    for col in ("slope", "ci_low", "ci_high", "se_seeds", "se_placement"):
        assert np.allclose(merged[col], merged[f"{col}_w"]), col
