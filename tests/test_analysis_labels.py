"""What the printed analysis and its figures say, as a reader sees them (audit of real stores):
family labels, the fitted curves' extent, titles that fit their figure."""

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, full_text, summary_table, write_analysis
from tests.sweeps import LR_GRID
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

ENTRY = {"name": "mup_ssm", "depth": "completep", "depth_alpha": None,
         "depth_exponents": {}, "overrides": {}}
TUNED = {**ENTRY, "depth_exponents": {"hidden": {"lr_adam": 0.375, "init": None}}}
ENTRIES = [ENTRY, {**ENTRY, "depth": "none"}, TUNED]


def _captured(monkeypatch, module) -> list:
    """The figures `module` saves, kept open for inspection instead of written."""
    figs: list = []
    monkeypatch.setattr(module, "save", lambda fig, path: figs.append(fig) or path)
    return figs


@pytest.fixture(scope="module")
def depth_rules(tmp_path_factory):
    """A store with a `param` axis of whole parameterization entries, as sweeps/depth_rule.yaml
    writes one; at width 128 the `depth: none` family did not run the smallest LR."""
    root = tmp_path_factory.mktemp("depth_rules")
    fams = [Planted("mup_ssm", 2**-7, 0.0, extra={"param": json.dumps(e, sort_keys=True)})
            for e in ENTRIES]
    t = synthetic_tables(fams, [64, 128], LR_GRID, [0, 1])
    tr = t.trials
    none = tr["param"].str.contains('"depth": "none"')
    t.trials = tr[~(none & (tr.width == 128) & (tr.lr == LR_GRID[0]))].copy()
    return analyze(write_results(root, t))


COMPACT = ["depth=completep", "depth=none",
           "depth=completep, depth_exponents.hidden.lr_adam=0.375"]


def test_printed_tables_name_a_param_axis_by_the_entries_that_differ(depth_rules, tmp_path):
    """`sweep`'s summary, `analyze`'s tables and analysis.md printed the whole JSON object of
    each family's `param` value; they give what differs between the families, as the
    figures do. The written tables keep the whole value: their readers parse it."""
    a = depth_rules
    for text in (summary_table(a), full_text(a)):
        assert '{"' not in text and "depth_alpha" not in text
        shown = [re.split(r"\s{2,}", row.strip())[1] for row in _table_lines(text)]
        assert shown and set(shown) == set(COMPACT)  # the `param` column of every table
    paths = write_analysis(a, tmp_path)
    md = (tmp_path / "analysis.md").read_text()
    assert '{"' not in md and "| depth=completep, depth_exponents.hidden.lr_adam=0.375 |" in md
    stored = pd.read_csv(tmp_path / "lr_opt.csv")
    assert {json.loads(v)["depth"] for v in stored["param"]} == {"completep", "none"}
    assert sorted(set(stored["param"])) == sorted(json.dumps(e, sort_keys=True) for e in ENTRIES)
    assert any(p.suffix == ".parquet" for p in paths)
    assert set(pd.read_parquet(tmp_path / "lr_opt.parquet")["param"]) == set(stored["param"])


def _table_lines(text: str) -> list[str]:
    """The rows of the printed tables (not the lines naming LRs left out)."""
    return [line for line in text.splitlines() if line.startswith("  mup_ssm  ")]


def test_flagged_lrs_and_training_curves_use_the_same_labels(depth_rules, monkeypatch):
    """The lines naming LRs left out of lr* and the training curves' panel titles go through
    groups.family_label: `param.depth=none`, as the loss-against-LR panels say it."""
    from mutransfer.analysis import curves, views
    from mutransfer.analysis.plots import families

    a = depth_rules
    assert views.flagged_cells(a) == [
        f"mup_ssm, param.depth=none, width 128: not run 2^{int(np.log2(LR_GRID[0]))}"]
    assert "  mup_ssm, param.depth=none, width 128: not run" in summary_table(a)
    figs = _captured(monkeypatch, curves)
    curves.plot_training_curves(a, a.prepared, a.steps, Path("unused.png"))
    titles = [ax.get_title() for ax in figs[0].axes if ax.get_title()]
    assert len(titles) == 6 and not any("{" in t for t in titles)
    panels = {label for label, _ in families(a, a.cells, sep="\n")}
    assert {t.rsplit("\n", 1)[0] for t in titles} == panels
    assert "mup_ssm\nparam.depth=completep\nparam.depth_exponents.hidden.lr_adam=0.375" in panels


def test_an_axis_part_of_the_store_leaves_unset_still_compacts():
    """Two sweep files in one folder, one with a `param` axis: the other's trials hold
    "unset" there; the objects are still given by their entries, each one it sets."""
    from mutransfer.analysis.groups import UNSET, compact_values

    values = [json.dumps(ENTRY, sort_keys=True), UNSET]
    assert compact_values("param", values) == {
        values[0]: "param.depth=completep, param.name=mup_ssm", UNSET: "param=unset"}
    from mutransfer.analysis.groups import compact_cells  # the printed tables' cells

    assert compact_cells(values)[values[0]] == "depth=completep, name=mup_ssm"
    assert compact_cells(["adam", "sgd"]) == {"adam": "adam", "sgd": "sgd"}


def test_a_fitted_curve_is_drawn_only_between_the_lrs_that_trained(tmp_path):
    """A transfer search ran 3 LRs at the wider width; its fitted parabola was drawn across
    the whole fit window, octaves past the LRs run. Each width's curve spans no more than the
    LRs that trained at that width (on a grid too: never past the outermost trained LR)."""
    from mutransfer.analysis.plots import _loss_panel, loss_limits
    from mutransfer.analysis.plotstyle import subplots, width_colors

    lrs = [2.0**e for e in np.arange(-12, -3.9, 0.5)]
    t = synthetic_tables([Planted("mup", 2**-7, 0.0)], [64, 128], lrs, [0])
    tr = t.trials
    near = (tr.lr >= 2**-7.5) & (tr.lr <= 2**-6.5)  # the window the search ran at 128
    t.trials = tr[(tr.width == 64) | near].copy()
    a = analyze(write_results(tmp_path, t))
    assert np.isfinite(a.lr_opt["curvature"]).all()  # both widths have a fitted parabola
    colors = width_colors(a.widths)
    fig, ax = subplots()
    _loss_panel(ax, a.cells, a.lr_opt, colors, loss_limits(a.cells, a.lr_opt), a.fit_window)
    dashed = {w: np.log2(line.get_xdata()) for line in ax.lines
              if line.get_linestyle() == "--" for w in a.widths if line.get_color() == colors[w]}
    assert set(dashed) == {64, 128}
    for w, x in dashed.items():
        trained = np.log2(a.cells[(a.cells.width == w) & a.cells.status.eq("trained")]["lr"])
        assert x.min() >= trained.min() - 1e-9 and x.max() <= trained.max() + 1e-9
        assert x.max() - x.min() <= 2 * a.fit_window + 1e-9
    assert np.ptp(dashed[128]) == pytest.approx(1.0)  # the 3 LRs run there, no further


def test_the_training_curves_title_fits_its_figure(tmp_path, monkeypatch):
    """The title ran off the figure in one long line (a store of one or three widths); it is
    wrapped to the figure's width and still says all it said."""
    from mutransfer.analysis import curves

    t = synthetic_tables([Planted("mup", 2**-7, 0.0)], [64], LR_GRID, [0])
    a = analyze(write_results(tmp_path, t))
    figs = _captured(monkeypatch, curves)
    curves.plot_training_curves(a, a.prepared, a.steps, Path("unused.png"))
    fig = figs[0]
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle
    box = title.get_window_extent(renderer)
    width = fig.bbox.width
    words = " ".join(title.get_text().split())
    assert box.width <= width
    for said in ("Training curves", "mean over seeds", curves.line_key(set(a.cells["status"]))):
        assert " ".join(said.split()) in words


@pytest.mark.parametrize("diverging", [False, True])
def test_the_training_curves_title_names_the_line_styles_drawn(tmp_path, monkeypatch,
                                                                diverging):
    """A store where no seed diverged has no dotted or dashed line: its title named both (the
    quickstart's says dashed, of its 10 diverged cells, and no dotted)."""
    from mutransfer.analysis import curves

    fam = Planted("sp", 2**-7, -1.0, stable_base=2**-6 if diverging else np.inf)
    a = analyze(write_results(tmp_path, synthetic_tables([fam], [64, 128], LR_GRID, [0, 1])))
    figs = _captured(monkeypatch, curves)
    curves.plot_training_curves(a, a.prepared, a.steps, Path("unused.png"))
    words = " ".join(figs[0]._suptitle.get_text().split())
    assert ("dashed: all diverged" in words) == diverging, words
    assert "dotted" not in words and "clipped at the top" in words


def test_a_param_axis_of_one_entry_is_named_in_the_header_by_the_entries_it_sets(tmp_path):
    """`fixed: param={"depth": "completep", "depth_alpha": null, ...}` printed the whole
    object; a single value has nothing to differ from, so its set entries are given."""
    fam = Planted("mup_ssm", 2**-7, 0.0, extra={"param": json.dumps(TUNED, sort_keys=True)})
    a = analyze(write_results(tmp_path, synthetic_tables([fam], [64, 128], LR_GRID, [0, 1])))
    fixed = [line for line in full_text(a).splitlines() if line.startswith("fixed: ")]
    assert fixed == ["fixed: param.depth=completep, param.depth_exponents.hidden.lr_adam=0.375, "
                     "param.name=mup_ssm"], fixed
