"""The loss-against-LR legend names the kinds of mark the figure drew, and no other: on the
quickstart store it promised hollow diamonds (some seeds diverged), ticks (not run) and
hollow stars (lr* on the grid edge) that appeared nowhere, while the lr* and stability
figures already named only what they drew."""

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from mutransfer.analysis import analyze
from mutransfer.analysis import plots as plots_mod
from tests.sweeps import LR_GRID, MUP
from tests.synthetic_sweeps import synthetic_tables, write_results


@pytest.fixture
def legend_of(monkeypatch, tmp_path):
    """Draws the loss figure of some tables and returns its legend's labels (save closes a
    figure: kept open here to read the artists)."""
    figs = []

    def keep(fig, path: Path) -> Path:
        figs.append(fig)
        return path

    monkeypatch.setattr(plots_mod, "save", keep)

    def draw(tables) -> list[str]:
        a = analyze(write_results(tmp_path, tables))
        plots_mod.plot_loss_vs_lr(a, tmp_path / "loss_vs_lr.png")
        return [t.get_text() for t in figs[-1].legends[0].get_texts()]

    yield draw
    for fig in figs:
        plt.close(fig)


def test_a_grid_where_everything_trained_names_no_divergence_not_run_or_edge_marks(legend_of):
    # mup's lr* 2^-7 inside 2^-12..2^-5, its boundary 2^-4.5 above the grid: every cell
    # trained at both widths, the far-left LRs lie above the loss range
    labels = legend_of(synthetic_tables([MUP], [64, 128], LR_GRID[:8], [0, 1]))
    assert "lr* (fit)" in labels and "fitted curve" in labels
    assert "above the y range (top strip)" in labels
    for absent in ("some seeds diverged", "every seed diverged", "not run at this width",
                   "lr* on grid edge", "stopped early"):
        assert not any(lab.startswith(absent) for lab in labels), (absent, labels)


def test_partial_diverged_and_not_run_cells_are_named_when_drawn(legend_of):
    t = synthetic_tables([MUP], [64, 128], LR_GRID, [0, 1])
    tr = t.trials
    t.trials = tr[~((tr.width == 128) & (tr.lr == LR_GRID[0]))].copy()  # not run at 128
    part = (t.trials.width == 64) & (t.trials.lr == 2**-5) & (t.trials.seed == 0)
    t.trials.loc[part, ["status", "diverged", "final_eval_loss"]] = ["diverged", True, None]
    labels = legend_of(t)
    for present in ("some seeds diverged", "every seed diverged", "not run at this width",
                    "lr* (fit)"):
        assert any(lab.startswith(present) for lab in labels), (present, labels)
    assert not any(lab.startswith("lr* on grid edge") for lab in labels), labels
