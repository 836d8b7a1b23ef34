"""`make_plots`: PNG figures and one report.html that carries them and the tables inside it."""

import base64
import re
from pathlib import Path

import matplotlib.image as mpimg
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
    from mutransfer.analysis.plotstyle import plt, width_colors

    t = synthetic_tables([MUP], [64, 128], LR_GRID, [0, 1])
    tr = t.trials
    t.trials = tr[~((tr.width == 128) & (tr.lr == LR_GRID[0]))].copy()  # not run at 128
    part = (t.trials.width == 64) & (t.trials.lr == 2**-5) & (t.trials.seed == 0)
    t.trials.loc[part, ["status", "diverged", "final_eval_loss"]] = ["diverged", True, None]
    a = analyze(write_results(tmp_path, t))
    fig, ax = plt.subplots()
    _loss_panel(ax, a.cells, a.lr_opt, width_colors(a.widths), loss_limits(a.cells),
                a.fit_window)
    drawn = {}
    for line in ax.lines:
        drawn.setdefault(line.get_marker(), []).extend(line.get_xdata())
    plt.close(fig)
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
