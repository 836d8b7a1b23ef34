"""The optimum-against-scale figure of a store where nothing trained.

A first horizon or depth sweep whose LR range is too high diverges everywhere; the analysis
then says so (core.NOTHING_TRAINED) and points to the stability plot. Before, the figure of
the optimum against the scale axes set a log2 y axis with no point on it, matplotlib raised
("Data cannot be log-scaled because all values are <= 0"), and the sweep printed
`plots failed`: no figure and no report.html at all for that store.
"""

from __future__ import annotations

import numpy as np

from mutransfer.analysis import analyze, make_plots
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

LR_GRID = [2.0**e for e in range(-10, -3)]


def all_diverged(tmp_path):
    """Width 64 and 128 x n_layer 2 and 4 (two scale axes), every trial diverged."""
    t = axes_tables({"width": [64, 128], "model.n_layer": [2, 4]}, "lr", LR_GRID,
                    lambda p: 2**-7, [0, 1])
    t.trials["status"] = "diverged"
    t.trials["diverged"] = True
    t.trials["final_eval_loss"] = np.nan
    t.trials["best_eval_loss"] = np.nan
    t.trials["diverge_step"] = t.trials["diverge_step"].fillna(5)
    return write_results(tmp_path, t)


def test_a_store_where_nothing_trained_still_gets_its_scale_figure_and_report(tmp_path):
    store = all_diverged(tmp_path)
    a = analyze(store)
    assert a.nothing_trained and not a.choice.is_default
    paths = {p.name for p in make_plots(store, analysis=a)}
    assert {"optimum_vs_scale.png", "stability_vs_width.png", "report.html"} <= paths
    assert "law.png" not in paths  # no law was fitted
