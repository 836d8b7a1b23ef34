"""The optimum of one loss-against-LR curve: the vertex of a weighted parabola in a window of
octaves centred on it (wide enough to average out an LR's own bump, following the grid's step),
or the argmin; and how far each seed pulls it."""

import numpy as np
import pytest

from mutransfer.analysis.fit import fit_optimum, grid_window, seed_deviations


def bowl(x, vertex, curvature=0.1, floor=3.0):
    return floor + curvature * (np.asarray(x, float) - vertex) ** 2


def lopsided(x, vertex, k=1.5, curvature=0.05, floor=3.0):
    """A real curve's shape: rising exponentially above the optimum, about linearly below."""
    t = np.asarray(x, float) - vertex
    return floor + curvature * 2.0 * (np.expm1(k * t) - k * t) / k**2


@pytest.mark.parametrize("step", [1.0, 0.5, 1 / 3, 0.25])
def test_a_parabola_gives_its_vertex_on_any_grid_spacing(step):
    x = np.arange(-14.0, -1.0, step)
    fit = fit_optimum(x, bowl(x, -7.3)[None, :])
    assert fit.fitted[0]
    assert fit.log2_lr[0] == pytest.approx(-7.3, abs=1e-6)
    assert fit.loss[0] == pytest.approx(3.0, abs=1e-9)


def test_on_a_lopsided_curve_lr_star_barely_moves_with_the_grids_offset_or_step():
    """The parabola's bias on a lopsided curve (k = 0.5, as real curves rise) depends on the
    window, which is centred on the optimum and not on the grid: every offset of a
    half-octave grid, and a one-octave grid, read the same lr* within 0.03 octave, on the
    shallow side of the true minimum and within 0.2 octave of it."""
    found = []
    for step in (0.5, 1.0):
        for shift in np.arange(0.0, step, 0.1):
            x = np.arange(-14.0, -1.0, step) + shift
            found.append(fit_optimum(x, lopsided(x, -7.3, k=0.5)[None, :]).log2_lr[0])
    found = np.array(found)
    assert np.ptp(found) < 0.03
    assert np.all((found < -7.3) & (found > -7.5))


def test_the_window_follows_the_grid_step_and_is_never_narrower_than_asked():
    # five steps of the grid, at least the window asked for (octaves)
    for step, expected in ((0.25, 2.5), (0.5, 2.5), (1.0, 5.0), (2.0, 10.0)):
        x = np.arange(-14.0, -1.0, step)
        assert grid_window(x, bowl(x, -7.0)[None, :], 2.5)[0] == pytest.approx(expected)
    x = np.arange(-14.0, -1.0, 0.5)
    assert grid_window(x, bowl(x, -7.0)[None, :], 3.5)[0] == pytest.approx(3.5)


def test_points_beyond_the_window_never_enter():
    # far from the optimum the curve is not a bowl (it flattens out): those points must not
    # pull the optimum, however many there are
    x = np.arange(-16.0, -1.0, 0.5)
    y = bowl(x, -9.4)
    far = np.abs(x + 9.4) > 2.5
    y[far] = 3.9
    fit = fit_optimum(x, y[None, :], window=2.5)
    assert fit.log2_lr[0] == pytest.approx(-9.4, abs=1e-6)
    assert fit.weights[0, far].max() == 0.0


def test_a_point_known_to_be_noisy_weighs_less():
    # one LR off the curve by 0.05: with its variance 100x the others' it barely moves lr*
    x = np.arange(-10.0, -3.0, 0.5)
    y = bowl(x, -6.6)
    y[np.flatnonzero(x == -5.5)] += 0.05
    alike = fit_optimum(x, y[None, :]).log2_lr[0]
    var = np.where(x == -5.5, 1e-2, 1e-4)[None, :]
    weighted = fit_optimum(x, y[None, :], point_var=var).log2_lr[0]
    assert abs(weighted + 6.6) < 0.1 * abs(alike + 6.6)


def test_a_curve_still_falling_at_the_largest_lr_has_no_fitted_minimum():
    # a curve flattening towards the largest LR: a parabola through the points could place a
    # vertex inside them, yet nothing shows a minimum there
    x = np.arange(-8.0, -3.0)
    y = np.array([3.5, 3.1, 2.98, 2.99, 2.97])
    fit = fit_optimum(x, y[None, :])
    assert not fit.fitted[0] and fit.log2_lr[0] == -4.0


def test_nan_points_are_left_out_and_an_empty_row_gives_nan():
    x = np.arange(-10.0, -3.0, 0.5)
    y = bowl(x, -6.6)
    y_gap = y.copy()
    y_gap[[0, 13]] = np.nan  # e.g. diverged or never run
    fit = fit_optimum(x, np.vstack([y_gap, np.full_like(y, np.nan)]))
    assert fit.log2_lr[0] == pytest.approx(-6.6, abs=1e-6)
    assert np.isnan(fit.log2_lr[1]) and fit.argmin[1] == -1 and not fit.fitted[1]


def test_three_points_in_the_window_fit_a_parabola_and_two_give_the_argmin():
    x = np.array([-9.0, -8.0, -7.0])
    y = bowl(x, -8.2)
    fit = fit_optimum(x, np.vstack([y, [np.nan, 3.1, 3.0]]))
    assert fit.fitted.tolist() == [True, False]
    assert fit.log2_lr[0] == pytest.approx(-8.2, abs=1e-6)
    assert fit.log2_lr[1] == -7.0


def test_rows_are_fitted_independently():
    x = np.arange(-14.0, -2.0, 0.5)
    rows = np.vstack([bowl(x, v, c) for v, c in ((-9.1, 0.05), (-6.2, 0.3), (-7.7, 0.1))])
    fit = fit_optimum(x, rows)
    np.testing.assert_allclose(fit.log2_lr, [-9.1, -6.2, -7.7], atol=1e-6)


def test_a_seed_offset_pulls_nothing_and_a_shifted_seed_pulls_by_its_shift():
    x = np.arange(-12.0, -3.0, 0.5)
    level = np.vstack([lopsided(x, -7.5) + d for d in (-0.02, 0.02)])     # same optimum
    fit = fit_optimum(x, level.mean(axis=0)[None, :])
    np.testing.assert_allclose(seed_deviations(x, level, fit), 0.0, atol=1e-9)
    shifted = np.vstack([bowl(x, -7.5 + d) for d in (-0.1, 0.1)])       # optima 0.2 apart
    fit = fit_optimum(x, shifted.mean(axis=0)[None, :])
    dev = seed_deviations(x, shifted, fit)
    assert fit.log2_lr[0] == pytest.approx(-7.5, abs=1e-6)
    np.testing.assert_allclose(dev, [-0.1, 0.1], atol=0.01)
