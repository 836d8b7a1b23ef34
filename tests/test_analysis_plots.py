"""`make_plots`: PNG figures and one report.html that carries them and the tables inside it."""

import base64
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, make_plots
from mutransfer.analysis.coordplot import coord_summary
from mutransfer.results.fs import write_part_atomic
from tests.sweeps import LR_GRID, MUP, SP, planted_results
from tests.synthetic_sweeps import synthetic_tables, write_results

WIDTHS = [64, 128, 256]


def coord_table(widths=WIDTHS) -> pd.DataFrame:
    """sp's in_proj grows like sqrt(width); everything else is flat."""
    rows = []
    for param in ("sp", "mup"):
        for w in widths:
            for seed in (0, 1):
                for step in range(3):
                    for layer, q in ((0, "in_proj"), (1, "in_proj"), (0, "ssm_state"),
                                     (-1, "logits")):
                        grow = (w / 64) ** 0.5 if (param, q) == ("sp", "in_proj") else 1.0
                        rows.append({"parameterization": param, "optimizer": "adam",
                                     "width": w, "seed": seed, "step": step, "layer": layer,
                                     "quantity": q, "rms": grow,
                                     "drms": 0.0 if step == 0 else 0.1 * step * grow})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    """Planted results (one part per trial) with a coordinate check, analysed."""
    root = tmp_path_factory.mktemp("plots")
    planted_results(root, WIDTHS, per_trial=True)
    write_part_atomic(coord_table(), root / "coord_check" / "coord.parquet")
    return analyze(root)


@pytest.fixture(scope="module")
def report(analysis):
    root = Path(analysis.results_dir)
    return root, make_plots(root, analysis=analysis)


def test_every_figure_is_written_as_a_png(report):
    root, paths = report
    names = [p.name for p in paths]
    assert names == ["loss_vs_lr.png", "lr_opt_vs_width.png", "stability_vs_width.png",
                     "training_curves.png", "coord_check.png", "report.html"]
    assert all(p.parent == root / "analysis" for p in paths)
    for p in paths[:-1]:
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 500
        assert img[..., :3].std() > 0.05  # something is drawn, not a blank canvas


def test_report_embeds_every_png_and_links_nothing(report):
    root, paths = report
    html = paths[-1].read_text(encoding="utf-8")
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert [base64.b64decode(u) for u in uris] == [p.read_bytes() for p in paths[:-1]]
    # self-contained: no other src or href, no script, no stylesheet link
    assert len(re.findall(r"\bsrc=", html)) == len(uris)
    assert "href=" not in html and "<script" not in html and "<link" not in html


def test_report_carries_the_tables_with_captions(report, analysis):
    _, paths = report
    html = paths[-1].read_text(encoding="utf-8")
    for title in ("Optimal learning rate", "Drift of the optimal LR with width",
                  "Stability boundary", "Transfer regret", "Does wider do better?",
                  "Training curves", "Coordinate check"):
        assert title in html
    assert html.count("<table") == 6 and html.count("<figcaption>") == 5
    sp_slope = analysis.drift.set_index("parameterization").loc["sp", "slope"]
    assert f"{sp_slope:+.3f}" in html


def test_the_lr_star_figure_names_where_its_intervals_come_from(report):
    # the seeds' jackknife (analysis/intervals.py), not the noise draws of an older estimator
    html = report[1][-1].read_text(encoding="utf-8")
    caption = re.search(r"<figcaption><b>Optimal LR against width.</b>([^<]*)<", html)[1]
    assert "95% interval (seeds&#x27; jackknife" in caption
    assert "noise draws" not in html


def test_coord_summary_averages_seeds_and_layers_at_the_last_step():
    s = coord_summary(coord_table()).set_index(["parameterization", "width", "quantity"])
    assert s.loc[("sp", 256, "in_proj"), "rms"] == pytest.approx(2.0)
    assert s.loc[("sp", 256, "in_proj"), "drms"] == pytest.approx(0.4)
    assert s.loc[("mup", 256, "in_proj"), "rms"] == pytest.approx(1.0)
    assert s.loc[("mup", 64, "logits"), "n_seeds"] == 2


def test_one_width_and_no_steps_still_give_a_report(tmp_path):
    t = synthetic_tables([SP, MUP], [128], LR_GRID, [0, 1])
    t.steps = t.steps.iloc[:0]
    write_results(tmp_path, t)
    paths = make_plots(tmp_path, out_dir=tmp_path / "plots")
    assert [p.name for p in paths] == ["loss_vs_lr.png", "lr_opt_vs_width.png",
                                       "stability_vs_width.png", "report.html"]
    html = paths[-1].read_text(encoding="utf-8")
    assert "drift needs at least two widths (found one: 128)" in html
    assert "Transfer regret" not in html


def test_an_override_axis_is_labelled_by_its_role_and_entry():
    from mutransfer.analysis.groups import family_label

    axes = ["param.overrides.ssm_B.init_m", "model.zero_real_fraction"]
    assert family_label(("mup_ssm", -1.0, 0.1), axes) == \
        "mup_ssm, ssm_B.init_m=-1.0, model.zero_real_fraction=0.1"
    assert family_label(("sp",), []) == "sp"
    assert family_label(("mup_ssm", -1.0, 0.1), axes, sep="\n").count("\n") == 2


def test_partial_and_not_run_lrs_are_marked_apart_from_trained_ones(tmp_path):
    """Loss against LR: the line joins only LRs where every seed trained; a partially
    diverged LR is a hollow diamond off the line, an LR not run at a width a tick on the
    bottom edge, a diverged one an x on the top edge."""
    from mutransfer.analysis.plots import _loss_panel, loss_limits
    from mutransfer.analysis.plotstyle import subplots, width_colors

    t = synthetic_tables([MUP], [64, 128], LR_GRID, [0, 1])
    tr = t.trials
    t.trials = tr[~((tr.width == 128) & (tr.lr == LR_GRID[0]))].copy()  # not run at 128
    part = (t.trials.width == 64) & (t.trials.lr == 2**-5) & (t.trials.seed == 0)
    t.trials.loc[part, ["status", "diverged", "final_eval_loss"]] = ["diverged", True, None]
    a = analyze(write_results(tmp_path, t))
    fig, ax = subplots()
    _loss_panel(ax, a.cells, a.lr_opt, width_colors(a.widths), loss_limits(a.cells),
                a.fit_window)
    drawn = {}
    for line in ax.lines:
        drawn.setdefault(line.get_marker(), []).extend(line.get_xdata())
    assert drawn["D"] == [2**-5]
    assert drawn["|"] == [LR_GRID[0]]
    # trained: 2^-12..2^-6 at 64, 2^-11..2^-5 at 128 (2^-5 on the line at 128 only)
    assert len(drawn["o"]) == 14 and drawn["o"].count(2**-5) == 1
    assert drawn["x"] == [2**-4, 2**-4]
    # the curve each lr* was fitted to, dashed, one per width with a fitted optimum
    assert sum(line.get_linestyle() == "--" for line in ax.lines) == 2
    assert len(make_plots(tmp_path)) == 5  # the whole report still draws


def test_a_fitted_optimum_between_grid_lrs_stays_inside_the_loss_axis(tmp_path):
    """The fitted curve's minimum between two grid LRs lies below every trained cell's loss: the
    loss-against-LR panel's y range still holds its star (it was clipped off the bottom)."""
    from mutransfer.analysis.plots import loss_limits
    from tests.synthetic_sweeps import Planted

    lrs = [2.0**e for e in range(-10, -4)]
    t = synthetic_tables([Planted("sp", 2**-7.5, 0.0)], [16, 32], lrs, [0])
    a = analyze(write_results(tmp_path, t))
    lowest_cell = a.cells.loc[a.cells["status"].eq("trained"), "mean_loss"].min()
    fitted = a.lr_opt["loss_at_opt"].min()
    assert fitted < lowest_cell  # the case: a vertex below the grid's best cell
    bottom, _ = loss_limits(a.cells, a.lr_opt)
    assert bottom < fitted


def test_report_says_where_the_results_came_from(tmp_path):
    import json
    import re

    from tests.synthetic_sweeps import Planted

    lrs = [2.0 ** k for k in range(-9, -3)]
    t = synthetic_tables([Planted("sp", 2.0 ** -6, -0.5)], WIDTHS, lrs, [0, 1])
    corpus = {"source": "stdlib", "root": "/usr/lib/python3.11", "files": 734,
              "bytes": 12_100_000, "hash": "ab12", "tokenizer": "byte",
              "train_tokens": 11_300_000, "eval_tokens": 773_100}
    t.trials["versions"] = json.dumps({"mutransfer": "0.1.0", "torch": "2.13.0",
                                       "git": "0123456789ab"})
    t.trials["corpus"] = json.dumps(corpus)
    envs = [json.dumps({"torch_threads": n, "cpu_capability": "AVX2"}) for n in (1, 2)]
    t.trials["env"] = [envs[i % 2] for i in range(len(t.trials))]
    t.trials["host"] = "node-a"
    root = write_results(tmp_path, t)
    (root / "sweep.yaml").write_text("name: planted\n# the file as run\n")
    html = (make_plots(root)[-1]).read_text()
    section = html[html.index('<h2 id="provenance">'):]
    assert "mutransfer 0.1.0, torch 2.13.0 (git 0123456789ab)" in section
    assert "stdlib at /usr/lib/python3.11: 734 files, 12,100,000 bytes, content hash ab12" \
        in section
    assert "environment (1 of 2: results differ across them)" in section  # two thread counts
    assert "node-a" in section and "written " in section and "# the file as run" in section
    titles = re.findall(r"<h2[^>]*>([^<]+)</h2>", html)
    assert len(set(titles)) == len(titles)  # no two sections share a title
    assert "Stability boundary against width" not in titles  # the figure's title


# --- the figures as a reader sees them (audit of the figures of real stores) ---------------

def _captured(monkeypatch, module) -> list:
    """The figures `module` saves, kept open for inspection instead of written."""
    figs: list = []
    monkeypatch.setattr(module, "save", lambda fig, path: figs.append(fig) or path)
    return figs


def test_a_narrow_log2_range_gets_at_least_three_labelled_ticks():
    """lr* within an octave (a check's sweep, a horizon store) showed one labelled tick, 2^-5:
    the reader could not read a value off the axis. Half and quarter octaves fill in."""
    from mutransfer.analysis.plotstyle import log2_axis, subplots

    fig, ax = subplots()
    values = [2**-5.65, 2**-5.3, 2**-4.96]
    ax.plot([1, 2, 3], values)
    log2_axis(ax, "y", values)
    lo, hi = min(values), max(values)
    ticks = [t for t in ax.yaxis.get_major_locator()() if lo <= t <= hi]
    labels = [ax.yaxis.get_major_formatter()(t) for t in ticks]
    assert len(ticks) >= 3
    assert all(labels) and "$2^{-5.25}$" in labels
    # a wide range keeps whole octaves, every second one
    fig, ax = subplots()
    log2_axis(ax, "x", [2**-12, 2**-2])
    assert all(float(np.log2(t)).is_integer() for t in ax.xaxis.get_major_locator()())


def test_families_at_one_width_are_drawn_side_by_side(analysis, monkeypatch):
    """sp and muP share the base model: at one width their lr* and bars coincide, and the
    family drawn first was hidden. Each family's points are shifted a little apart."""
    from mutransfer.analysis import plots

    figs = _captured(monkeypatch, plots)
    plots.plot_lr_opt(analysis, Path("unused.png"))
    ax = figs[0].axes[0]
    xs = [tuple(np.round(line.get_xdata(), 6)) for line in ax.lines
          if line.get_marker() == "o" and len(line.get_xdata())]
    assert len(xs) == 2 and set(xs[0]).isdisjoint(xs[1])


def test_the_stability_legend_names_only_the_marks_drawn(tmp_path, monkeypatch):
    """With no LR diverged (a search that stayed low), no bracket is drawn: the legend named
    one anyway; the triangle says the boundary lies above the LRs run."""
    from mutransfer.analysis import plots

    t = synthetic_tables([MUP], [64, 128], [2.0**e for e in range(-10, -5)], [0, 1])
    a = analyze(write_results(tmp_path, t))
    figs = _captured(monkeypatch, plots)
    plots.plot_stability(a, tmp_path / "s.png")
    labels = [tx.get_text() for tx in figs[0].axes[0].get_legend().get_texts()]
    assert not any("a seed diverged" in t for t in labels)
    assert any("boundary lies above" in t for t in labels)


def test_marks_off_the_loss_range_get_a_row_per_width(tmp_path):
    """Two widths diverged at one LR drew their x on one spot of the top edge, the last
    width's hiding the others' (and a narrower width's partial or above-range mark); the
    not-run ticks stood on the lowest curve. Each width has a row in a strip above the data
    and one below it."""
    from mutransfer.analysis.plots import _loss_panel, loss_limits
    from mutransfer.analysis.plotstyle import subplots, width_colors

    t = synthetic_tables([MUP], [64, 128], LR_GRID, [0, 1])
    tr = t.trials
    t.trials = tr[~((tr.width == 128) & (tr.lr == LR_GRID[0]))].copy()  # not run at 128
    a = analyze(write_results(tmp_path, t))
    lo, hi = loss_limits(a.cells)
    fig, ax = subplots()
    _loss_panel(ax, a.cells, a.lr_opt, width_colors(a.widths), (lo, hi), a.fit_window)
    ys = {m: [y for line in ax.lines if line.get_marker() == m for y in line.get_ydata()]
          for m in ("x", "|")}
    assert len(ys["x"]) == 2 and len(set(ys["x"])) == 2 and min(ys["x"]) > hi
    assert ys["|"] and max(ys["|"]) < lo


def test_a_param_axis_of_whole_entries_is_labelled_by_what_differs(tmp_path):
    """A depth sweep's `param` axis holds whole parameterization entries as JSON: titles and
    legends carried the whole object and ran off the figure. Only the differing entries."""
    import json

    from mutransfer.analysis.groups import compact_values
    from mutransfer.analysis.plots import families
    from tests.synthetic_sweeps import Planted

    entry = {"name": "mup_ssm", "depth": "completep", "depth_alpha": None, "overrides": {}}
    tuned = {**entry, "depth_exponents": {"hidden": {"lr_adam": 0.375, "init": None}}}
    values = [json.dumps(e, sort_keys=True) for e in (entry, {**entry, "depth": "none"}, tuned)]
    assert list(compact_values("param", values).values()) == [
        "param.depth=completep", "param.depth=none",
        "param.depth=completep, param.depth_exponents.hidden.lr_adam=0.375"]
    assert compact_values("optimizer", ["adam", "sgd"]) == {"adam": "optimizer=adam",
                                                            "sgd": "optimizer=sgd"}
    fams = [Planted("mup", 2**-7, 0.0, extra={"param": v}) for v in values[:2]]
    a = analyze(write_results(tmp_path, synthetic_tables(fams, [64, 128], LR_GRID, [0])))
    assert [label for label, _ in families(a, a.lr_opt)] == ["mup, param.depth=completep",
                                                             "mup, param.depth=none"]


def test_a_large_legend_goes_below_the_axes():
    """Long family labels made a legend larger than the free space: it covered the points."""
    from matplotlib.lines import Line2D

    from mutransfer.analysis.plotstyle import place_legend, subplots

    fig, ax = subplots()
    ax.plot([1, 2], [1, 2])
    handles = [Line2D([], [], label=f"family {i} with a rather long label, slope +0.0{i}")
               for i in range(4)]
    place_legend(ax, handles)
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    assert box.y1 < ax.get_window_extent().y0  # wholly below the axes


def test_coord_lines_differ_in_marker_as_well_as_colour(tmp_path, monkeypatch):
    """Activations of one size (conv and ssm_out in a Mamba block) lay on one another, and
    tab20 gave pairs of near colours: each activation has its own marker too."""
    from mutransfer.analysis import coordplot

    figs = _captured(monkeypatch, coordplot)
    coordplot.plot_coord_check(coord_table(), tmp_path / "c.png")
    ax = figs[0].axes[0]
    markers = {line.get_marker() for line in ax.lines}
    top_xlabel = ax.get_xlabel()
    assert len(markers) == 3  # in_proj, ssm_state, logits
    assert top_xlabel == ""  # the shared x axis is labelled once, under the bottom row
    styles = coordplot.quantity_styles([f"q{i}" for i in range(11)])
    assert len({s["color"] for s in styles.values()}) == 11


def test_one_family_gets_a_larger_panel_and_edge_stars_keep_their_colour():
    """A check's sweep (one family, five widths) was a 4.6-inch panel squeezed beside its
    legend; a hollow lr* on the grid edge lost its width's colour."""
    from mutransfer.analysis.plots import _grid, _star

    fig, axes = _grid(1)
    assert fig.get_size_inches()[0] >= 6
    _star(axes[0], pd.Series({"lr_opt": 0.01, "loss_at_opt": 2.5, "edge": True}), 3.0, "red")
    star = axes[0].lines[-1]
    assert star.get_markeredgecolor() == "red" and star.get_markerfacecolor() == "white"
