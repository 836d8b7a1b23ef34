"""The transfer figures of stores off the usual shape (one LR per width, a width where every
trial diverged, many widths) say what the tables say: read on the matplotlib artists."""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from mutransfer.analysis import analyze
from mutransfer.analysis import plots as plots_mod
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_sweeps import synthetic_tables, write_results


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plot function drew, kept open (save closes them) to read the artists."""
    figs = []

    def keep(fig, path: Path) -> Path:
        figs.append(fig)
        return path

    monkeypatch.setattr(plots_mod, "save", keep)
    yield figs
    for fig in figs:
        plt.close(fig)


def _analysis(root: Path, tables):
    write_results(root, tables)
    return analyze(root)


def test_a_star_sits_at_its_fitted_loss_when_that_width_lies_above_the_others(tmp_path, drawn):
    # one LR per width; width 64's loss is far above the others' (3.6 vs ~3.0), beyond the
    # 2.5x-median cap of the y range: its star was pinned to the top of the range (~3.08)
    t = synthetic_tables([SP], [64, 128, 256], [LR_GRID[len(LR_GRID) // 2]], [0, 1])
    tr = t.trials
    for w, loss in ((64, 3.6), (128, 3.0), (256, 2.95)):
        tr.loc[tr["width"] == w, ["final_eval_loss", "best_eval_loss", "last_finite_loss"]] = loss
    a = _analysis(tmp_path, t)
    plots_mod.plot_loss_vs_lr(a, tmp_path / "loss_vs_lr.png")
    ax = drawn[0].axes[0]
    stars = sorted(float(ln.get_ydata()[0]) for ln in ax.lines if ln.get_marker() == "*")
    assert stars == pytest.approx(sorted(a.lr_opt["loss_at_opt"].astype(float)), abs=1e-9)
    low, high = ax.get_ylim()
    assert all(low <= y <= high for y in stars)


def test_lr_opt_figure_names_a_width_without_lr_star_and_no_mark_it_did_not_draw(tmp_path,
                                                                                 drawn):
    # every sp trial at width 256 diverged: the lr* table has no lr* there (NaN, no interval);
    # the legend offered "no interval" (no such mark drawn) and said nothing of width 256
    t = synthetic_tables([SP, MUP], [64, 128, 256], LR_GRID, [0, 1, 2])
    tr = t.trials
    gone = (tr["parameterization"] == SP.parameterization) & (tr["width"] == 256)
    tr.loc[gone, "status"] = "diverged"
    tr.loc[gone, "diverged"] = True
    tr.loc[gone, ["final_eval_loss", "best_eval_loss"]] = np.nan
    a = _analysis(tmp_path, t)
    opt = a.lr_opt
    missing = opt[~np.isfinite(opt["lr_opt"].astype(float))]
    assert list(missing["width"]) == [256]
    plots_mod.plot_lr_opt(a, tmp_path / "lr_opt.png")
    ax = drawn[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    drawn_bare = [ln for ln in ax.lines if ln.get_marker() == "s" and len(ln.get_xdata())]
    if not drawn_bare:
        assert not any(lab.startswith("no interval") for lab in labels), labels
    sp_label = next(lab for lab in labels if lab.startswith(f"{SP.parameterization}:"))
    assert "no lr* at width 256" in sp_label


def test_loss_legend_of_eight_widths_does_not_run_into_the_title(tmp_path, drawn):
    widths = [16, 32, 64, 128, 256, 512, 1024, 2048]
    a = _analysis(tmp_path, synthetic_tables([SP, MUP], widths, LR_GRID, [0, 1]))
    plots_mod.plot_loss_vs_lr(a, tmp_path / "loss_vs_lr.png")
    fig = drawn[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    title = fig._suptitle.get_window_extent(renderer)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(f"width {w}" in labels for w in widths)
    assert not legend.overlaps(title), (legend, title)
    assert legend.y1 <= fig.bbox.height + 1 and legend.y0 >= -1  # inside the figure
