"""`mutransfer plot`: each width has one row in the strips above and below the loss panels,
the same row in every panel. A family that did not run the narrowest width drew every other
width's diverged x one row lower than the panels beside it, which share its y axis: width
128's marks stood in the row width 64 has next door."""


import numpy as np

from mutransfer.analysis import analyze, make_plots
from mutransfer.analysis.plotstyle import width_colors
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_sweeps import synthetic_tables, write_results


def test_a_width_keeps_its_strip_row_in_a_panel_that_lacks_a_narrower_width(tmp_path, drawn):
    t = synthetic_tables([SP, MUP], [64, 128, 256], LR_GRID, [0, 1])
    tr = t.trials
    t.trials = tr[~((tr.parameterization == "mup") & (tr.width == 64))].copy()
    root = write_results(tmp_path / "store", t)
    a = analyze(root)
    div = a.cells[a.cells.status.eq("diverged")]
    assert set(div.parameterization) == {"sp", "mup"}  # both panels have x marks
    assert set(div[div.parameterization == "mup"].width) == {128, 256}

    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    fig = drawn["loss_vs_lr.png"]
    colors = width_colors(a.widths)
    rows: dict[int, set[float]] = {}
    for ax in fig.axes:
        for ln in ax.lines:
            if ln.get_marker() != "x":
                continue
            w = next(w for w in a.widths if np.allclose(ln.get_color(), colors[w]))
            rows.setdefault(w, set()).update(np.round(ln.get_ydata(), 9))
    assert set(rows) == {64, 128, 256}
    assert all(len(ys) == 1 for ys in rows.values()), rows  # one row per width, every panel
    y = {w: ys.pop() for w, ys in rows.items()}
    assert y[64] < y[128] < y[256]  # the narrowest width's row nearest the data
