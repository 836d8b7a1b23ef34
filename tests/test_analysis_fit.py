"""The optimum of one loss-against-LR curve: an asymmetric bowl fitted in a window of octaves
centred on the optimum, or the argmin; and how far each seed pulls it."""

import numpy as np
import pytest

from mutransfer.analysis.fit import fit_optimum, phi, seed_deviations


def linex(x, vertex, k=1.5, curvature=0.05, floor=3.0):
    """A bowl rising faster above the optimum (k > 0): e^{k t} above, linear below."""
    return floor + curvature * phi(np.asarray(x, float) - vertex, np.asarray(k, float))


def bowl(x, vertex, curvature=0.1, floor=3.0):
    return floor + curvature * (x - vertex) ** 2


@pytest.mark.parametrize("step", [1.0, 0.5, 1 / 3, 0.25])
def test_an_asymmetric_curve_gives_its_optimum_on_any_grid_spacing(step):
    x = np.arange(-14.0, -1.0, step)
    fit = fit_optimum(x, linex(x, -7.3, k=2.0)[None, :])
    assert fit.fitted[0] and fit.shape[0] == "linex"
    assert fit.log2_lr[0] == pytest.approx(-7.3, abs=1e-6)
    assert fit.params[0, 2] == pytest.approx(2.0, abs=1e-4)   # the asymmetry k
    assert fit.loss[0] == pytest.approx(3.0, abs=1e-9)


@pytest.mark.parametrize("shift", [0.0, 0.2, 0.45, 0.7, 0.95])
def test_a_grid_shifted_by_part_of_a_step_gives_the_same_optimum(shift):
    x = np.arange(-14.0, -2.0) + shift   # one-octave grid, offset
    fit = fit_optimum(x, linex(x, -7.3, k=2.4)[None, :])
    assert fit.log2_lr[0] == pytest.approx(-7.3, abs=1e-6)


def test_a_parabola_is_an_asymmetric_bowl_with_k_zero():
    x = np.arange(-12.0, -3.0)
    fit = fit_optimum(x, bowl(x, -7.6)[None, :])
    assert fit.log2_lr[0] == pytest.approx(-7.6, abs=1e-6)
    assert fit.params[0, 2] == pytest.approx(0.0, abs=1e-4)


def test_points_beyond_the_window_never_enter():
    # far from the optimum the curve is not a bowl (it flattens out): those points must not
    # pull the optimum, however many there are
    x = np.arange(-16.0, -1.0, 0.5)
    y = linex(x, -9.4)
    far = np.abs(x + 9.4) > 2.5
    y[far] = 3.9
    fit = fit_optimum(x, y[None, :], window=2.5)
    assert fit.log2_lr[0] == pytest.approx(-9.4, abs=1e-6)
    assert fit.weights[0, far].max() == 0.0


def test_a_curve_still_falling_at_the_largest_lr_has_no_fitted_minimum():
    # a curve flattening towards the largest LR: a bowl through the points could place a
    # vertex inside them, yet nothing shows a minimum there
    x = np.arange(-8.0, -3.0)
    y = np.array([3.5, 3.1, 2.98, 2.99, 2.97])
    fit = fit_optimum(x, y[None, :])
    assert not fit.fitted[0] and fit.log2_lr[0] == -4.0


def test_nan_points_are_left_out_and_an_empty_row_gives_nan():
    x = np.arange(-10.0, -3.0, 0.5)
    y = linex(x, -6.6)
    y_gap = y.copy()
    y_gap[[0, 13]] = np.nan  # e.g. diverged or never run
    fit = fit_optimum(x, np.vstack([y_gap, np.full_like(y, np.nan)]))
    assert fit.log2_lr[0] == pytest.approx(-6.6, abs=1e-6)
    assert np.isnan(fit.log2_lr[1]) and fit.argmin[1] == -1 and not fit.fitted[1]


def test_three_points_in_the_window_fit_a_parabola_and_two_give_the_argmin():
    x = np.array([-9.0, -8.0, -7.0])
    y = bowl(x, -8.2)
    fit = fit_optimum(x, np.vstack([y, [np.nan, 3.1, 3.0]]))
    assert fit.shape.tolist() == ["parabola", ""]
    assert fit.log2_lr[0] == pytest.approx(-8.2, abs=1e-6)
    assert not fit.fitted[1] and fit.log2_lr[1] == -7.0


def test_rows_are_fitted_independently():
    x = np.arange(-14.0, -2.0, 0.5)
    rows = np.vstack([linex(x, v, k) for v, k in ((-9.1, 0.5), (-6.2, 2.5), (-7.7, -1.0))])
    fit = fit_optimum(x, rows)
    np.testing.assert_allclose(fit.log2_lr, [-9.1, -6.2, -7.7], atol=1e-6)


def test_a_seed_offset_pulls_nothing_and_a_shifted_seed_pulls_by_its_shift():
    x = np.arange(-12.0, -3.0, 0.5)
    level = np.vstack([linex(x, -7.5) + d for d in (-0.02, 0.02)])     # same optimum
    fit = fit_optimum(x, level.mean(axis=0)[None, :])
    np.testing.assert_allclose(seed_deviations(x, level, fit), 0.0, atol=1e-9)
    shifted = np.vstack([bowl(x, -7.5 + d) for d in (-0.1, 0.1)])       # optima 0.2 apart
    fit = fit_optimum(x, shifted.mean(axis=0)[None, :])
    dev = seed_deviations(x, shifted, fit)
    assert fit.log2_lr[0] == pytest.approx(-7.5, abs=1e-6)
    np.testing.assert_allclose(dev, [-0.1, 0.1], atol=0.01)
