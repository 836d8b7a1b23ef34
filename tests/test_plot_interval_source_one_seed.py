"""`mutransfer plot` of a one-seed sweep: the lr* figure's bars come from the fit's residuals
(the lr* table's ci_method "fit"), and its legend says so; it said "seeds' jackknife", a
source a store of one seed cannot have."""


from matplotlib.figure import Figure

from mutransfer.analysis import analyze, make_plots
from mutransfer.analysis.intervals import INTERVAL_SOURCE
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_sweeps import synthetic_tables, write_results


def _bars_title(fig: Figure) -> str:
    return fig.axes[0].get_legend().get_title().get_text()


def test_one_seed_bars_are_named_after_the_fit_residuals(tmp_path, drawn):
    root = write_results(tmp_path / "store",
                         synthetic_tables([SP, MUP], [64, 128, 256], LR_GRID, [0]))
    a = analyze(root)
    assert set(a.lr_opt["ci_method"]) == {"fit"} and a.lr_opt["ci_low"].notna().all()
    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    title = _bars_title(drawn["lr_opt_vs_width.png"])
    assert title == "bars: 95% interval (fit residuals + grid placement)"


def test_seeded_bars_keep_the_jackknife_name(tmp_path, drawn):
    root = write_results(tmp_path / "store",
                         synthetic_tables([SP, MUP], [64, 128, 256], LR_GRID, [0, 1, 2]))
    a = analyze(root)
    assert set(a.lr_opt["ci_method"]) == {"seeds"}
    make_plots(root, analysis=a, out_dir=tmp_path / "plots")
    assert _bars_title(drawn["lr_opt_vs_width.png"]) == f"bars: 95% interval ({INTERVAL_SOURCE})"
