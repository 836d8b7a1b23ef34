"""The optimum of one loss-against-LR curve: quadratic vertex in log2 LR, or the argmin."""

import numpy as np
import pytest

from mutransfer.analysis.fit import fit_optimum


def bowl(x, vertex, curvature=0.1, floor=3.0):
    return floor + curvature * (x - vertex) ** 2


def test_exact_parabola_gives_its_vertex_between_grid_points():
    x = np.arange(-12.0, -3.0)  # a grid in whole octaves
    fit = fit_optimum(x, bowl(x, -7.3)[None, :])
    assert fit.quadratic[0]
    assert fit.log2_lr[0] == pytest.approx(-7.3, abs=1e-9)
    assert fit.loss[0] == pytest.approx(3.0, abs=1e-9)
    assert x[fit.argmin[0]] == -7.0
    assert fit.n_points[0] == 5


def test_fit_uses_only_the_points_near_the_argmin():
    # far from the optimum the curve is not a parabola (it flattens out): those points must
    # not pull the vertex
    x = np.arange(-14.0, -3.0)
    y = bowl(x, -9.4)
    y[x > -6.5] = 3.0 + 0.1 * 2.9**2  # a plateau more than two points away
    fit = fit_optimum(x, y[None, :])
    assert fit.log2_lr[0] == pytest.approx(-9.4, abs=1e-9)


def test_argmin_when_the_parabola_opens_downward():
    x = np.arange(-10.0, -5.0)
    y = np.array([3.5, 3.2, 3.0, 3.25, 3.6])
    # noisy points whose best parabola is concave, though the centre is the lowest point
    y_down = np.array([3.5, 4.0, 3.4, 4.0, 3.5])
    fit = fit_optimum(x, np.vstack([y, y_down]))
    assert fit.quadratic.tolist() == [True, False]
    assert fit.log2_lr[1] == -8.0
    assert fit.loss[1] == 3.4


def test_argmin_when_the_vertex_lies_outside_the_fitted_span():
    # loss still falling at the grid's low end: the parabola's vertex is beyond the data
    x = np.arange(-8.0, -3.0)
    y = bowl(x, -10.0)
    fit = fit_optimum(x, y[None, :])
    assert not fit.quadratic[0]
    assert fit.log2_lr[0] == -8.0


def test_argmin_on_the_edge_is_kept_even_when_a_one_sided_vertex_is_inside_the_span():
    # a curve still falling at the largest LR but flattening: a parabola through the points
    # has its vertex inside them (at -5.1), yet nothing shows a minimum there
    x = np.arange(-8.0, -3.0)
    y = np.array([3.5, 3.1, 2.98, 2.99, 2.97])
    fit = fit_optimum(x, y[None, :])
    assert not fit.quadratic[0] and fit.log2_lr[0] == -4.0


def test_nan_points_are_left_out_and_an_empty_row_gives_nan():
    x = np.arange(-10.0, -3.0)
    y = bowl(x, -6.6)
    y_gap = y.copy()
    y_gap[[0, 6]] = np.nan  # e.g. diverged or never run
    fit = fit_optimum(x, np.vstack([y_gap, np.full_like(y, np.nan)]))
    assert fit.log2_lr[0] == pytest.approx(-6.6, abs=1e-9)
    assert np.isnan(fit.log2_lr[1]) and fit.argmin[1] == -1 and not fit.quadratic[1]


def test_two_usable_points_fall_back_to_the_argmin():
    x = np.array([-9.0, -8.0, -7.0])
    fit = fit_optimum(x, np.array([[np.nan, 3.1, 3.0]]))
    assert not fit.quadratic[0] and fit.log2_lr[0] == -7.0


def test_irregular_lrs_use_the_k_nearest_points_or_one_octave_if_more():
    rng = np.random.default_rng(3)
    sparse = np.sort(rng.uniform(-14, -4, 12))
    dense = np.sort(rng.uniform(-14, -4, 60))
    for x in (sparse, dense):
        fit = fit_optimum(x, bowl(x, -8.8)[None, :], k=5)
        x0 = x[fit.argmin[0]]
        assert fit.n_points[0] == max(5, (np.abs(x - x0) <= 1.0).sum())
        assert fit.log2_lr[0] == pytest.approx(-8.8, abs=1e-9)
    assert fit.n_points[0] > 5  # the dense case used its window


def test_rows_are_fitted_independently():
    x = np.arange(-12.0, -3.0)
    vertices = np.array([-10.2, -8.0, -5.5])
    y = np.stack([bowl(x, v) for v in vertices])
    np.testing.assert_allclose(fit_optimum(x, y).log2_lr, vertices, atol=1e-9)


def test_fewer_than_three_fit_points_is_refused():
    with pytest.raises(ValueError):
        fit_optimum(np.arange(5.0), np.zeros((1, 5)), k=2)
