"""Each LR weighs by its own seeds' scatter, shrunk toward a smooth model of scatter against
distance from the optimum, so one noisy LR far from the optimum cannot set the curve's shape;
model and scatter are read from the fit window's LRs, so an LR outside it cannot move lr*; how
far one LR moves lr* is reported; two seeds at one width get an interval from the points."""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze
from mutransfer.analysis.cells import all_seeds, cell_stats, seed_lr_arrays
from mutransfer.analysis.fit import fit_optimum
from mutransfer.analysis.optimum import settle_cycles
from mutransfer.analysis.pointnoise import PRIOR_DF, point_variance, smooth_model
from mutransfer.analysis.views import view_lr_opt
from mutransfer.results.store import Tables

X = np.arange(-10.0, -2.9, 0.5)   # half-octave grid, optimum near -6.6
EVERY_LR = np.ones(len(X), bool)  # the noise model read from the whole grid


def curve(x, v=-6.6, k=1.0, a=0.06):
    """Rising exponentially above the optimum v, about linearly below (k > 0)."""
    t = np.asarray(x, float) - v
    return 3.0 + a * 2.0 * (np.expm1(k * t) - k * t) / k**2


def trials(seed_loss: np.ndarray, x=X, width=64) -> pd.DataFrame:
    s, l_ = np.meshgrid(np.arange(seed_loss.shape[0]), np.arange(len(x)), indexing="ij")
    return pd.DataFrame({
        "trial_id": [f"t{i}" for i in range(s.size)], "sweep": "t", "width": width,
        "parameterization": "sp", "lr": 2.0 ** x[l_.ravel()], "seed": s.ravel(),
        "optimizer": "adam", "status": "complete", "diverged": False,
        "final_eval_loss": seed_loss.ravel(), "best_eval_loss": seed_loss.ravel()})


def stats_of(seed_loss):
    t = trials(seed_loss).assign(loss=lambda d: d["final_eval_loss"])
    arr = seed_lr_arrays(t)
    return arr, cell_stats(arr, all_seeds(arr))


def test_the_smooth_model_follows_scatter_growing_away_from_the_optimum():
    d = X + 6.5
    s2 = 1e-4 * np.exp(np.where(d > 0, 1.5 * d, 0.3 * -d))
    m = smooth_model(X, s2, np.full(len(X), 7.0), -6.5)
    assert m[-1] / m[np.argmin(np.abs(d))] > 20      # grows fast above
    assert m[0] / m[np.argmin(np.abs(d))] < 5         # slowly below


def test_an_lr_with_a_wild_scatter_is_shrunk_toward_the_model_but_stays_larger():
    rng = np.random.default_rng(0)
    loss = curve(X)[None, :] + 0.01 * rng.standard_normal((2, len(X)))
    loss[:, 12] += [-0.3, 0.3]            # one LR, two seeds 0.6 apart
    arr, st = stats_of(loss)
    pv = point_variance(arr, st.usable[0], -6.5, EVERY_LR)
    raw = 0.5 * 0.6**2
    assert np.median(pv) < pv[12] < raw   # shrunk: 1 df against PRIOR_DF of the model
    assert pv[12] == pytest.approx((raw + PRIOR_DF * np.median(pv)) / (1 + PRIOR_DF), rel=0.5)


def test_a_noisy_lr_far_above_the_optimum_barely_moves_lr_star():
    """Eight seeds: at 2^-5 they scatter 10x wider than elsewhere and their mean sits off the
    curve; weighted by its own scatter, that LR moves lr* a fraction of what it moves it when
    every LR weighs alike."""
    rng = np.random.default_rng(1)
    sd = np.where(X == -5.0, 0.1, 0.01)
    loss = curve(X)[None, :] + sd * rng.standard_normal((8, len(X)))
    loss[:, X == -5.0] += 0.08
    arr, st = stats_of(loss)
    mean = st.usable_loss
    without = mean.copy()
    without[0, X == -5.0] = np.nan
    pv = point_variance(arr, st.usable[0], -6.5, EVERY_LR)[None, :] / 8
    weighted = fit_optimum(X, mean, point_var=pv).log2_lr[0]
    weighted_without = fit_optimum(X, without, point_var=pv).log2_lr[0]
    alike = fit_optimum(X, mean).log2_lr[0]
    alike_without = fit_optimum(X, without).log2_lr[0]
    assert abs(weighted - weighted_without) < 0.3 * abs(alike - alike_without)


def test_lr_star_reports_how_far_one_lr_moves_it():
    rng = np.random.default_rng(2)
    loss = curve(X)[None, :] + 0.01 * rng.standard_normal((4, len(X)))
    a = analyze("one-lr", tables=Tables(trials(loss), pd.DataFrame()))
    row = a.lr_opt.iloc[0]
    half = np.log2(row.ci_high / row.ci_low) / 2
    assert 0 < row.one_lr_shift < half and not row.one_lr_flag
    # analyze's printed table carries it (octaves; '!' would flag a shift beyond half-width)
    assert view_lr_opt(a)["one-LR shift"].iloc[0] == f"{row.one_lr_shift:.2f}"


def test_two_seeds_at_one_width_get_an_interval_from_each_lrs_scatter():
    """One width, two seeds: the seeds' pulls have 1 df, too few; the points' scatter (one df
    per LR, less the seed offset) carries the interval, and says so."""
    rng = np.random.default_rng(3)
    loss = curve(X)[None, :] + 0.01 * rng.standard_normal((2, len(X)))
    a = analyze("two-seeds", tables=Tables(trials(loss), pd.DataFrame()))
    row = a.lr_opt.iloc[0]
    assert row.ci_method == "points"
    assert row.ci_low < row.lr_opt < row.ci_high
    assert row.ci_df == int(row.n_fit_points) - 1


def test_an_lr_outside_the_window_however_noisy_cannot_move_lr_star():
    """The noise model is fitted from the window's LRs only: the seeds at two LRs far above
    the optimum (beyond the 2.5-octave window) scatter from not at all to 2 nats apart, their
    means and every seed's offset unchanged, and lr* stays where it was, to the last digit."""
    x = np.arange(-11.0, -0.9, 0.5)
    rng = np.random.default_rng(4)
    base = curve(x, k=0.4)[None, :] + 0.01 * rng.standard_normal((4, len(x)))
    answers = []
    for d in (0.0, 1.0):
        loss = base.copy()
        loss[:, x == -1.5] += d * np.array([[1.0], [-1.0], [1.0], [-1.0]])
        loss[:, x == -1.0] -= d * np.array([[1.0], [-1.0], [1.0], [-1.0]])
        a = analyze("local", tables=Tables(trials(loss, x=x), pd.DataFrame()))
        answers.append(float(np.log2(a.lr_opt.iloc[0].lr_opt)))
    assert answers[0] < -4.5                          # the window stops short of 2^-2
    assert answers[1] == pytest.approx(answers[0], abs=1e-9)


def test_a_window_whose_edge_lr_comes_and_goes_keeps_the_lrs_both_its_states_hold():
    """The window's LRs and their noise model are iterated together; when an edge LR leaves
    the window with its scatter in the model and re-enters without it, the row settles on the
    LRs both states hold, whichever it started from; a row still moving goes on."""
    small = np.array([[False, True, True, True, False]])
    large = np.array([[False, True, True, True, True]])
    for start, back in ((small, large), (large, small)):
        now, settled = settle_cycles([start, back], start, np.zeros(1, bool))
        assert settled.all() and (now == small).all()
    now, settled = settle_cycles([small], large, np.zeros(1, bool))
    assert not settled.any() and (now == large).all()
