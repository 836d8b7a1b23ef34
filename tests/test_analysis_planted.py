"""The analysis recovers planted truths from results tables written in the store's layout.

Planted: lr* ~ width^-1 under "sp", constant under "mup", out of the grid's low end under
"spectral" (an edge optimum); loss is a bowl in log2 LR plus seed noise; every LR above a planted
stability LR diverges; one group misses a seed; some trials failed.
"""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze
from mutransfer.results.store import Tables
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

WIDTHS = [64, 128, 256, 512]
GRID = [2.0**e for e in np.arange(-14, -3.9, 0.5)]  # half-octave steps, 2^-14 .. 2^-4
SEEDS = [0, 1, 2]
NOISE = 0.01

SP = Planted("sp", lr_opt_base=2**-8, exponent=-1.0, stable_base=2**-5.25,
             stable_exponent=-1.0, loss_per_doubling=+0.02)  # wider is worse under sp here
MUP = Planted("mup", lr_opt_base=2**-7, exponent=0.0, stable_base=2**-4.75)
SPECTRAL = Planted("spectral", lr_opt_base=2**-13, exponent=-1.0)  # leaves the grid at 256


def planted_results(root, families=(SP, MUP, SPECTRAL), **kw):
    t = synthetic_tables(list(families), WIDTHS, GRID, SEEDS, noise=NOISE, **kw)
    trials = t.trials
    # a missing seed: seed 2 never ran for sp at width 128
    trials = trials[~((trials.parameterization == "sp") & (trials.width == 128)
                      & (trials.seed == 2))].copy()
    # failed trials carry no loss and must not count as trained or diverged
    failed = (trials.parameterization == "mup") & (trials.width == 256) & (trials.seed == 1)
    trials.loc[failed, ["status", "final_eval_loss"]] = ["failed", np.nan]
    t.trials = trials
    return write_results(root, t)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    return analyze(planted_results(tmp_path_factory.mktemp("planted")))


def rows(df, param):
    return df[df.parameterization == param].sort_values("width")


def test_drift_exponents_recovered(analysis):
    d = analysis.drift.set_index("parameterization")
    assert d.loc["sp", "slope"] == pytest.approx(-1.0, abs=0.1)
    assert d.loc["mup", "slope"] == pytest.approx(0.0, abs=0.1)
    # the interval brackets the estimate, has a width (there is noise) and is informative
    # (its calibration is tested in test_analysis_intervals.py)
    for param in ("sp", "mup"):
        lo, slope, hi = d.loc[param, ["ci_low", "slope", "ci_high"]]
        assert lo < slope < hi and hi - lo < 0.5
    # the widths' seeds pooled: sp has 3 + 2 + 3 + 3 seeds (one failed at 128), df 7
    assert d.loc["sp", "ci_method"] == "seeds" and d.loc["sp", "ci_df"] == 7
    assert d.loc["sp", "df"] == 2 and d.loc["sp", "ols_low"] < d.loc["sp", "slope"]
    assert d.loc["sp", "n_widths"] == 4 and d.loc["sp", "widths"] == "64,128,256,512"


def test_optimal_lr_per_width_recovered_with_intervals(analysis):
    for p in (SP, MUP):
        r = rows(analysis.lr_opt, p.parameterization)
        truth = np.log2([p.lr_opt(w, WIDTHS[0]) for w in WIDTHS])
        np.testing.assert_allclose(np.log2(r.lr_opt), truth, atol=0.3)
        assert (r.method == "parabola").all()
        assert (r.ci_low <= r.lr_opt).all() and (r.lr_opt <= r.ci_high).all()
        assert (r.ci_high > r.ci_low).all()
        assert not r.edge.any()


def test_missing_seed_and_failed_trials(analysis):
    sp = rows(analysis.lr_opt, "sp").set_index("width")
    assert sp.loc[128, "n_seeds"] == 2 and sp.loc[64, "n_seeds"] == 3
    mup_cells = analysis.cells[(analysis.cells.parameterization == "mup")
                               & (analysis.cells.width == 256)]
    assert (mup_cells.n_trials == 2).all()  # the failed seed is gone, not counted as a trial
    assert analysis.n_failed == len(GRID)
    assert any("failed" in n for n in analysis.notes)


def test_edge_optimum_is_flagged_with_a_hint(analysis):
    r = rows(analysis.lr_opt, "spectral").set_index("width")
    # planted lr*: 2^-13 (inside), 2^-14 (= the grid's smallest LR), 2^-15, 2^-16 (outside)
    assert r.edge.to_dict() == {64: False, 128: True, 256: True, 512: True}
    assert set(r.loc[[128, 256, 512], "edge_side"]) == {"low"}
    assert all("widen the LR range downward" in n for n in r.loc[[256, 512], "note"])
    assert r.loc[512, "lr_argmin"] == GRID[0]
    spectral_drift = analysis.drift.set_index("parameterization").loc["spectral"]
    assert "edge" in spectral_drift.note


def test_stability_boundary_between_the_planted_lrs(analysis):
    for p in (SP, MUP):
        st = rows(analysis.stability, p.parameterization)
        planted = np.array([p.stable(w, WIDTHS[0]) for w in st.width])
        assert (st.largest_trained < planted).all()
        assert (planted < st.smallest_any_diverged).all()
        assert (st.smallest_all_diverged == st.smallest_any_diverged).all()  # no seed apart
        assert st.clean.all()
        # adjacent grid LRs around the planted value: the boundary is their geometric mean
        np.testing.assert_allclose(st.boundary, planted, rtol=0.01)
    slope = analysis.stability_slope.set_index("parameterization").slope
    assert slope["sp"] == pytest.approx(-1.0, abs=0.1)
    assert slope["mup"] == pytest.approx(0.0, abs=0.1)
    spectral = rows(analysis.stability, "spectral")
    assert spectral.boundary.isna().all() and spectral.note.str.contains("above the LRs run").all()


def test_diverged_lrs_are_left_out_of_the_fit(analysis):
    cells = analysis.cells[(analysis.cells.parameterization == "sp")
                           & (analysis.cells.width == 512)]
    planted = SP.stable(512, WIDTHS[0])
    assert ((cells.status == "diverged") == (cells.lr > planted)).all()
    sp512 = rows(analysis.lr_opt, "sp").set_index("width").loc[512]
    assert sp512.n_lrs_diverged == (np.array(GRID) > planted).sum()
    assert sp512.n_lrs == len(GRID) - sp512.n_lrs_diverged


def test_transfer_regret(analysis):
    sp = rows(analysis.regret, "sp").set_index("width")
    # lr* at 64 is 2^-8: two octaves off the optimum at 256, so regret = 0.04 * 2^2
    assert sp.loc[256, "lr_used"] == 2**-8
    assert sp.loc[256, "regret"] == pytest.approx(SP.curvature * 4, abs=0.03)
    # at 512 the transferred LR lies above the stability boundary (2^-8.25)
    assert sp.loc[512, "transfer"] == "diverged" and np.isinf(sp.loc[512, "regret"])
    mup = rows(analysis.regret, "mup")
    assert (mup.regret < 0.02).all() and (mup.regret >= 0).all()


def test_monotonicity(analysis):
    m = analysis.monotonicity.set_index("parameterization")
    assert m.loc["mup", "monotone"] and not m.loc["sp", "monotone"]
    # planted: +0.02 per doubling under sp; the worst step is one of those, named with its size
    step, size = m.loc["sp", "worst_step"].split(": ")
    assert step in {"64->128", "128->256", "256->512"}
    assert float(size) == pytest.approx(SP.loss_per_doubling, abs=0.015)
    assert m.loc["mup", "worst_step"] == ""


def test_the_analysis_is_deterministic(analysis):
    again = analyze(analysis.results_dir)
    pd.testing.assert_frame_equal(again.lr_opt, analysis.lr_opt)
    pd.testing.assert_frame_equal(again.drift, analysis.drift)


def test_optuna_chosen_lrs(tmp_path):
    """Irregular LRs, a fresh set per width, none repeated: the same exponents come out."""
    # uniform random LRs (harder than Optuna's, which crowd near the optimum)
    t = synthetic_tables([SP, MUP], WIDTHS, None, SEEDS, noise=NOISE,
                         random_lrs=(2**-14, 2**-4, 60), rng_seed=0)
    a = analyze(write_results(tmp_path, t))
    assert a.cells.groupby(["parameterization", "width"]).lr.nunique().eq(60).all()
    slope = a.drift.set_index("parameterization").slope
    assert slope["sp"] == pytest.approx(-1.0, abs=0.1)
    assert slope["mup"] == pytest.approx(0.0, abs=0.1)


def test_optuna_study_per_seed(tmp_path):
    """The sweep runs one Optuna study per seed: no LR is shared between seeds. The curve
    pools every seed's points, and each study's pull on lr* gives the interval."""
    parts = [synthetic_tables([SP, MUP], WIDTHS, None, [s], noise=0.005,
                              random_lrs=(2**-14, 2**-4, 20), rng_seed=s) for s in SEEDS]
    t = Tables(pd.concat([p.trials for p in parts], ignore_index=True),
               pd.concat([p.steps for p in parts], ignore_index=True))
    assert t.trials.groupby(["parameterization", "width", "lr"]).seed.nunique().eq(1).all()
    a = analyze(write_results(tmp_path, t))
    slope = a.drift.set_index("parameterization").slope
    assert slope["sp"] == pytest.approx(-1.0, abs=0.1)
    assert slope["mup"] == pytest.approx(0.0, abs=0.1)
    assert (a.lr_opt.n_seeds == 3).all() and (a.lr_opt.ci_high > a.lr_opt.ci_low).all()


def test_one_diverged_seed_makes_an_lr_partially_diverged(tmp_path):
    """One seed of three diverging leaves the LR out of the fit (its survivors' mean is shown
    but not used); two of three the same; all three make it diverged."""
    t = synthetic_tables([MUP], [64], GRID, SEEDS, noise=NOISE)
    tr = t.trials
    lr_a, lr_b = GRID[10], GRID[12]
    one = (tr.lr == lr_a) & (tr.seed == 0)
    two = (tr.lr == lr_b) & tr.seed.isin([0, 1])
    tr.loc[one | two, ["status", "diverged", "final_eval_loss"]] = ["diverged", True, np.nan]
    a = analyze(write_results(tmp_path, t))
    cells = a.cells.set_index("lr")
    assert cells.loc[lr_a, "status"] == "partial" and cells.loc[lr_b, "status"] == "partial"
    trained = tr[(tr.lr == lr_a) & (tr.seed != 0)].final_eval_loss.mean()
    assert cells.loc[lr_a, "raw_mean_loss"] == pytest.approx(trained)
    assert cells.loc[lr_a, "mean_loss"] == pytest.approx(trained, abs=2 * NOISE)  # seed-adjusted
    assert a.lr_opt.iloc[0].n_lrs_partial == 2 and a.lr_opt.iloc[0].n_lrs == len(GRID) - 4
    st = a.stability.iloc[0]
    assert st.smallest_any_diverged == lr_a
    assert not st.clean and "ambiguous" in st.note  # lr_a diverged below trained LRs


def test_optimum_at_the_stability_edge_says_so(tmp_path):
    p = Planted("mup", lr_opt_base=2**-5, exponent=0.0, stable_base=2**-5.25)
    a = analyze(write_results(tmp_path, synthetic_tables([p], [64, 128], GRID, SEEDS)))
    r = a.lr_opt.iloc[0]
    assert r.edge and r.edge_side == "high" and "stability edge" in r.note


def test_extra_axes_split_groups_and_constant_ones_are_reported(tmp_path):
    fams = [Planted("mup", 2**-7, 0.0, extra={"model.zero_real_fraction": f, "data.len": 64})
            for f in (0.0, 0.1)]
    fams[1].lr_opt_base = 2**-9
    a = analyze(write_results(tmp_path, synthetic_tables(fams, WIDTHS, GRID, SEEDS)))
    assert a.axes == ["model.zero_real_fraction"]
    assert a.fixed == {"data.len": 64}
    d = a.drift.set_index("model.zero_real_fraction")
    assert len(d) == 2 and (d.slope.abs() < 0.1).all()
    opt = a.lr_opt.groupby("model.zero_real_fraction").lr_opt.median()
    assert np.log2(opt[0.0]) == pytest.approx(-7, abs=0.3)
    assert np.log2(opt[0.1]) == pytest.approx(-9, abs=0.3)


def test_optimizer_is_an_axis_only_when_it_varies(tmp_path):
    t = synthetic_tables([MUP], WIDTHS[:2], GRID, SEEDS)
    sgd = t.trials.copy()
    sgd["optimizer"] = "sgd"
    sgd["trial_id"] = sgd["trial_id"] + "-sgd"
    t.trials = pd.concat([t.trials, sgd], ignore_index=True)
    a = analyze(write_results(tmp_path, t))
    assert a.axes == ["optimizer"]
    assert sorted(a.lr_opt.optimizer.unique()) == ["adam", "sgd"]
