"""`mutransfer plot`: a partially diverged LR whose surviving seeds beat every trained LR (near
the stability edge, the usual place of an SP optimum) is drawn inside the loss axis, where the
legend says its diamond is, not clipped off the bottom of the panel."""


import numpy as np
import pytest

from mutransfer.analysis import analyze, make_plots
from tests.sweeps import LR_GRID, MUP
from tests.synthetic_sweeps import synthetic_tables, write_results


def test_a_partial_lr_below_every_trained_lr_is_inside_the_loss_axis(tmp_path, drawn):
    t = synthetic_tables([MUP], [64, 128], LR_GRID, [0, 1, 2])
    tr = t.trials
    cell = (tr.width == 128) & np.isclose(tr.lr, 2**-6)
    lost = cell & (tr.seed == 0)
    tr.loc[lost, ["status", "diverged", "final_eval_loss", "best_eval_loss"]] = \
        ["diverged", True, np.nan, np.nan]
    tr.loc[cell & ~lost, ["final_eval_loss", "best_eval_loss"]] -= 0.08  # the best survivors
    root = write_results(tmp_path / "store", t)
    a = analyze(root)
    cells = a.cells.set_index(["width", "lr"])
    partial = cells.loc[(128, 2**-6)]
    assert partial.status == "partial"
    trained = cells.loc[cells.status == "trained", "mean_loss"]
    assert partial.mean_loss < trained.min()  # the case: the survivors beat every trained LR

    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    ax = drawn["loss_vs_lr.png"].axes[0]
    diamonds = np.vstack([ln.get_xydata() for ln in ax.lines if ln.get_marker() == "D"])
    assert diamonds.tolist() == [[2**-6, pytest.approx(partial.mean_loss)]]
    bottom, top = ax.get_ylim()
    assert bottom < partial.mean_loss < top
    legend = [t.get_text() for t in drawn["loss_vs_lr.png"].legends[0].get_texts()]
    assert any(lab.startswith("some seeds diverged") for lab in legend)
