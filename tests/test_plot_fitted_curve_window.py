"""`mutransfer plot`: the dashed curve of the loss figure spans the window lr* was fitted in
(five steps of the LR grid, at least --fit-window octaves: fit.grid_window), between the
outermost LRs that trained. On a one-octave grid the fit weighs points up to 5 octaves from
lr*, and the curve stopped at 2.5 (the least window), half-way to them."""


import numpy as np
import pytest

from mutransfer.analysis import analyze, make_plots
from mutransfer.analysis.fit import WINDOW_STEPS
from mutransfer.analysis.plotstyle import width_colors
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

GRID = [2.0**e for e in range(-16, -1)]  # one octave apart, 15 LRs


def test_the_fitted_curve_reaches_across_the_window_the_fit_used(tmp_path, drawn):
    # a shallow bowl (so the curve stays inside the y range) in the middle of a wide grid
    fam = Planted("mup", 2**-9, 0.0, curvature=0.01)
    root = write_results(tmp_path / "store", synthetic_tables([fam], [64, 128], GRID, [0, 1]))
    a = analyze(root)
    assert (a.lr_opt["method"] == "parabola").all() and (a.lr_opt["grid_step"] == 1.0).all()
    window = max(a.fit_window, WINDOW_STEPS * 1.0)  # 5 octaves: what the fit weighed
    assert window > a.fit_window  # the case

    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    ax = drawn["loss_vs_lr.png"].axes[0]
    colors = width_colors(a.widths)
    for w in a.widths:
        o = a.lr_opt.set_index("width").loc[w]
        curve = [ln for ln in ax.lines if ln.get_linestyle() == "--"
                 and np.allclose(ln.get_color(), colors[w])]
        assert len(curve) == 1
        x = np.log2(curve[0].get_xdata())
        v = np.log2(o.lr_opt)
        assert x.min() == pytest.approx(v - window, abs=1e-9)
        assert x.max() == pytest.approx(v + window, abs=1e-9)
        # the curve is the table's parabola: loss_at_opt + curvature (x - log2 lr*)^2
        np.testing.assert_allclose(curve[0].get_ydata(),
                                   o.loss_at_opt + o.curvature * (x - v) ** 2)
