"""The analysis on stores of unusual shape (an outside audit, 2026-11-28).

Each test is one shape a real store took: another program's Parquet file in a table folder,
every optimum of a family on the grid's edge, ... and what the analysis must say about it.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mutransfer
from mutransfer.analysis import analyze
from mutransfer.cli import main
from mutransfer.results.store import Store
from tests.sweeps import planted_results
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

# -- a Parquet file that is not a part of the table ---------------------------------------------


def _foreign(path) -> None:
    """Another program's Parquet file: none of the table's columns."""
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), path)


def test_another_programs_parquet_file_in_trials_is_skipped_with_a_warning(tmp_path):
    """Its rows were read as trials (no width, lr, seed): `analyze` died in a traceback
    casting the missing widths to int64."""
    root = planted_results(tmp_path / "store", [64, 128])
    alone = analyze(root)
    _foreign(root / "trials" / "notes.parquet")
    with pytest.warns(UserWarning, match=r"1 Parquet files skipped .* not parts of its tables"):
        a = analyze(root)
    assert a.n_trials == alone.n_trials
    assert a.axes == alone.axes  # its columns are not taken for sweep axes
    np.testing.assert_array_equal(a.lr_opt["lr_opt"], alone.lr_opt["lr_opt"])


def test_another_programs_parquet_file_in_steps_is_skipped_too(tmp_path):
    root = planted_results(tmp_path / "store", [64, 128])
    _foreign(root / "steps" / "notes.parquet")
    with pytest.warns(UserWarning, match="not parts of its tables"):
        tables = Store(str(root)).tables()
    assert "a" not in tables.steps and tables.steps["trial_id"].notna().all()


def test_the_analyze_command_reads_past_a_foreign_file(tmp_path, capsys):
    root = planted_results(tmp_path / "store", [64, 128])
    _foreign(root / "trials" / "notes.parquet")
    assert main(["analyze", str(root)]) == 0
    err = capsys.readouterr().err
    assert "not parts of its tables" in err and "notes.parquet" in err
    assert "Traceback" not in err


def test_a_sweep_scan_sets_a_foreign_file_aside_instead_of_reading_it_as_trials(tmp_path):
    root = planted_results(tmp_path / "store", [64], per_trial=True)
    _foreign(root / "trials" / "notes.parquet")
    state = Store(str(root)).scan(repair=False)
    assert "nan" not in state.failed and all(isinstance(t, str) for t in state.complete)
    assert [Path(p).name for p in state.foreign] == ["notes.parquet"] and not state.corrupt


def test_a_sweep_says_it_set_a_foreign_file_aside_and_runs_no_cell_again(tmp_path, ray_local):
    """Not "a damaged part (its cell runs again)": the file was never a part of any cell."""
    spec = {"name": "tiny", "storage": str(tmp_path / "store"),
            "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
            "train": {"steps": 2, "batch_size": 2, "seq_len": 16, "eval_every": 2},
            "axes": {"width": [16], "lr": [0.01]}}
    assert mutransfer.run(spec, out=io.StringIO()).ok
    _foreign(tmp_path / "store" / "trials" / "notes.parquet")
    out = io.StringIO()
    result = mutransfer.run(spec, out=out)
    text = out.getvalue()
    assert result.ok and "damaged part" not in text, text
    assert "set aside a file that is no part of this store" in text and "notes.parquet" in text
    assert not (tmp_path / "store" / "trials" / "notes.parquet").exists()


# -- a drift whose optima lie on the grid's edge --------------------------------------------------
# The slope is sum_w c_w log2 lr*_w with c_w < 0 below the mean log2 width and > 0 above. An
# optimum on the high edge is at least the value shown (lr* >= it), one on the low edge at most.


def _edge_store(tmp_path, families, widths=(64, 128)):
    grid = [2.0**e for e in range(-10, -3)]  # 2^-10 .. 2^-4
    t = synthetic_tables(list(families), list(widths), grid, [0, 1])
    return analyze(write_results(tmp_path / "store", t))


def test_both_optima_above_the_grid_leave_the_slope_unbounded(tmp_path):
    """Both widths' lr* lie above 2^-4: each is only known to be >= 2^-4, so their difference
    (the slope) can be anything. The drift must not call +0.000 a bound."""
    a = _edge_store(tmp_path, [Planted("sp", 2**-2, 0.0)])
    d = a.drift.iloc[0]
    assert a.lr_opt["edge_side"].tolist() == ["high", "high"]
    assert d.edge_bound == "none" and np.isnan(d.ci_low)
    assert "not even a bound" in d.note and "slope is a bound" not in d.note


def test_the_widest_optimum_above_the_grid_makes_the_slope_a_lower_bound(tmp_path):
    """lr* inside the grid at 64, above it at 128: lr*_128 >= 2^-4, so the drift is at least
    the slope shown."""
    a = _edge_store(tmp_path, [Planted("sp", 2**-6, 3.0)])  # 2^-6 at 64, 2^-3 at 128
    d = a.drift.iloc[0]
    assert a.lr_opt.sort_values("width")["edge_side"].tolist() == ["", "high"]
    assert d.edge_bound == "lower"
    assert "slope is a lower bound (the drift is at least the slope)" in d.note


def test_the_narrowest_optimum_above_the_grid_makes_the_slope_an_upper_bound(tmp_path):
    a = _edge_store(tmp_path, [Planted("sp", 2**-3, -3.0)])  # 2^-3 at 64, 2^-6 at 128
    d = a.drift.iloc[0]
    assert a.lr_opt.sort_values("width")["edge_side"].tolist() == ["high", ""]
    assert d.edge_bound == "upper"
    assert "slope is an upper bound (the drift is at most the slope)" in d.note


def test_a_single_trained_lr_per_width_bounds_nothing(tmp_path):
    """One LR per width (a sweep of `lr: [0.003]`): lr* is that LR at every width, the slope
    0 by construction, and nothing is known about the drift."""
    t = synthetic_tables([Planted("sp", 2**-7, 0.0)], [64, 128], [2**-8], [0, 1])
    a = analyze(write_results(tmp_path, t))
    d = a.drift.iloc[0]
    assert (a.lr_opt["edge_side"] == "only").all()
    assert d.edge_bound == "none" and "not even a bound" in d.note


# -- another scale axis in the width role ---------------------------------------------------------


@pytest.fixture
def depth_only(tmp_path):
    """A depth sweep at one width (sweeps/depth.yaml's shape): model.n_layer takes the width
    role; lr* inside the grid at depth 1, above it at depth 2; no LR diverges."""
    from tests.synthetic_axes import axes_tables

    grid = [2.0**e for e in range(-10, -3)]
    t = axes_tables({"width": [64], "model.n_layer": [1, 2]}, "lr", grid,
                    lambda p: 2**-7 if p["model.n_layer"] == 1 else 2**-3.5, [0, 1])
    return analyze(write_results(tmp_path, t))


def test_no_table_of_a_depth_sweep_speaks_of_widths(depth_only):
    """Titles, headers and notes name the axis in the width role, not the model width."""
    from mutransfer.analysis import full_text

    a = depth_only
    assert a.scale_name("width") == "model.n_layer"
    body = full_text(a).split("\n\n", 1)[1]  # the header line names the role on purpose
    said = [line for line in body.splitlines() if re.search(r"(?<!half-)\bwidths?\b", line)]
    assert not said, said
    slope = a.stability_slope.iloc[0]
    assert slope.note.startswith("needs at least two values of model.n_layer")
    assert "Slope of the stability boundary with model.n_layer" in full_text(a)
    assert "Does a larger model.n_layer do better?" in full_text(a)


# The final losses of a real depth sweep (sweeps/depth.yaml's shape, CPU-sized: one-layer base,
# d_state 4, 12 steps), LRs 2^-10 .. 2^-4, per (n_layer, seed).
REAL_DEPTH = {(1, 0): [5.4420, 5.3741, 5.2167, 4.8486, 4.1241, 3.5148, 3.5595],
              (1, 1): [5.4631, 5.4084, 5.2664, 4.9169, 4.2239, 3.5565, 3.5436],
              (2, 0): [5.4355, 5.3572, 5.1676, 4.7607, 4.0650, 3.5893, 3.6862],
              (2, 1): [5.4676, 5.4038, 5.2279, 4.8048, 4.1232, 3.6251, 3.5676]}


def test_the_drift_note_names_the_axis_whose_optimum_has_no_interval(tmp_path):
    """The losses rise on one side of the argmin 2^-5 only, so neither lr* has an interval;
    the drift's note says so of model.n_layer 1,2, not of 'width 1,2'."""
    from tests.synthetic_axes import axes_tables

    grid = [2.0**e for e in range(-10, -3)]
    t = axes_tables({"width": [64], "model.n_layer": [1, 2]}, "lr", grid, lambda p: 2**-5,
                    [0, 1])
    tr = t.trials
    for (depth, seed), losses in REAL_DEPTH.items():
        for lr, loss in zip(grid, losses):
            tr.loc[(tr["model.n_layer"] == depth) & (tr.seed == seed) & (tr.lr == lr),
                   "final_eval_loss"] = loss
    a = analyze(write_results(tmp_path, t))
    bare = a.lr_opt[a.lr_opt.ci_low.isna() & ~a.lr_opt.edge].sort_values("width")
    assert len(bare) and not a.lr_opt.edge.any()  # lr* without an interval, not on the edge
    depths = ",".join(str(int(w)) for w in bare["width"])
    assert a.drift.iloc[0].note == f"no interval: lr* at model.n_layer {depths} has none"


# -- an interrupted sweep ---------------------------------------------------------------------


def _left_running(root, trial_id: str) -> None:
    """The per-eval part an attempt writes at its first report (results/store.py), left in
    running/ when the sweep stops before the trial finishes."""
    import pandas as pd

    from mutransfer.results.fs import write_part_atomic

    row = pd.DataFrame([{"trial_id": trial_id, "step": 0, "tokens": 0, "train_loss": 5.5,
                         "eval_loss": 5.5, "lr": 1e-3, "grad_norm": 1.0,
                         "tokens_per_s": 1.0, "attempt": "abcdef123456"}])
    write_part_atomic(row, root / "running" / f"part-{trial_id}-abcdef123456-00000.parquet")


def test_the_analysis_of_an_interrupted_sweep_says_its_tables_are_partial(tmp_path, capsys):
    """A sweep stopped with Ctrl-C (41 of 52 trials done, one trial killed mid-run) says
    "run the sweep again to resume (the analysis waits for a complete run)"; `analyze` on that
    store must not present its tables as the sweep's without a word."""
    root = planted_results(tmp_path / "store", [64, 128])
    _left_running(root, "0123456789abcdef")  # a trial with no row in trials/
    a = analyze(root)
    assert a.notes[0].startswith("1 trials started and never finished")
    assert f"the {a.n_trials} trials finished so far" in a.notes[0]
    assert main(["analyze", str(root)]) == 0
    assert "1 trials started and never finished" in capsys.readouterr().out
    assert "never finished" in (root / "analysis" / "analysis.md").read_text()


def test_a_finished_trials_leftover_running_part_is_no_sign_of_an_unfinished_sweep(tmp_path):
    """A trial that crashed and was recorded as failed (or was retried and finished) may
    leave its per-eval parts behind: it has a row, so the sweep is complete."""
    root = planted_results(tmp_path / "store", [64, 128])
    tid = str(analyze(root).prepared.trials["trial_id"].iloc[0])
    _left_running(root, tid)
    assert not any("never finished" in n for n in analyze(root).notes)


# -- two sweep files run into one results folder ---------------------------------------------


def _two_sweeps(tmp_path, steps_b: int):
    """Sweep "grid" (a one-octave grid, seed 0) and sweep "extra" (one more LR, seeds 0 and 1)
    run into one folder, as `mutransfer sweep other.yaml --storage RESULTS` allows; "extra"
    trains `steps_b` steps where "grid" trains 200."""
    import json

    import pandas as pd

    from mutransfer.results.store import Tables

    p = Planted("sp", 2**-7, 0.0)
    grid = synthetic_tables([p], [64, 128], [2.0**e for e in range(-10, -3)], [0])
    extra = synthetic_tables([p], [64, 128], [2**-6.5], [0, 1], rng_seed=1)
    grid.trials["sweep"], extra.trials["sweep"] = "grid", "extra"
    for t, steps in ((grid, 200), (extra, steps_b)):
        t.trials["config"] = [json.dumps({"train": {"lr": lr, "seed": int(s), "steps": steps},
                                          "width": int(w)})
                              for lr, s, w in zip(t.trials.lr, t.trials.seed, t.trials.width)]
    both = Tables(pd.concat([grid.trials, extra.trials], ignore_index=True),
                  pd.concat([grid.steps, extra.steps], ignore_index=True))
    return analyze(write_results(tmp_path, both))


def test_trials_of_two_sweeps_are_named_as_such_not_as_the_first_parts_sweep(tmp_path):
    """The header named the sweep of whichever part file came first ("sweep extra: 18
    trials") and said nothing of the other."""
    a = _two_sweeps(tmp_path, steps_b=200)
    assert a.sweep == "grid + extra"
    assert "the trials come from 2 sweeps: grid (14), extra (4)" in a.notes[0]
    assert "their settings agree outside the swept axes" in a.notes[0]


def test_two_sweeps_that_train_different_lengths_are_flagged_as_not_comparable(tmp_path):
    a = _two_sweeps(tmp_path, steps_b=50)
    assert "train.steps 200 vs 50" in a.notes[0] and "not comparable" in a.notes[0]


# -- a target other than the LR ---------------------------------------------------------------


def test_the_regret_table_names_the_target_not_the_lr(tmp_path):
    """With `--target train.weight_decay` (a linear target: a grid from 0) the regret table
    showed 'lr used', 'octaves from lr*' and 'best lr' for weight decays and their distance
    in its own units."""
    from mutransfer.analysis import views
    from tests.synthetic_axes import axes_tables

    wd = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    t = axes_tables({"width": [64, 128]}, "train.weight_decay", wd, lambda p: 0.12, [0, 1],
                    log=False, fixed={"lr": 1e-3}, curvature=4.0)
    a = analyze(write_results(tmp_path, t), target="train.weight_decay", scale=["width"])
    cols = list(views.view_regret(a).columns)
    assert {"train.weight_decay used", "distance from train.weight_decay*",
            "best train.weight_decay"} <= set(cols)
    assert not any("lr" in c.replace("train.", "") for c in cols), cols


def test_the_regret_table_of_the_lr_keeps_its_headers(tmp_path):
    from mutransfer.analysis import views

    a = analyze(planted_results(tmp_path / "store", [64, 128]))
    assert {"lr used", "octaves from lr*", "best lr"} <= set(views.view_regret(a).columns)


# -- trials stopped early (search.stop) ---------------------------------------------------------


@pytest.fixture
def stopped(tmp_path):
    """A grid with `search.stop`: at width 128 the five lowest LRs of seed 0 stopped early
    (status 'stopped', the last loss they reached), as a real CPU sweep of that shape did."""
    t = synthetic_tables([Planted("sp", 2**-7, 0.0)], [64, 128],
                         [2.0**e for e in range(-12, -3)], [0, 1])
    tr = t.trials
    hit = (tr.width == 128) & (tr.lr <= 2**-8) & (tr.seed == 0)
    tr.loc[hit, "status"] = "stopped"
    tr.loc[hit, "final_eval_loss"] += 1.0
    return analyze(write_results(tmp_path, t))


def test_cells_stopped_early_are_not_called_not_run_in_the_summary(stopped):
    from mutransfer.analysis import summary_table

    lines = summary_table(stopped).splitlines()
    flagged = [line for line in lines if "width 128:" in line]
    assert flagged == ["  sp, width 128: stopped early (search.stop) 2^-12..2^-8"]


def test_the_lr_star_table_counts_cells_stopped_early_apart_from_lrs_not_run(stopped):
    """Its note said "not run at this width: 2^-12..2^-8" of LRs that ran and were stopped."""
    row = stopped.lr_opt.set_index("width").loc[128]
    assert row.n_lrs_stopped == 5 and row.n_lrs_not_run == 0 and row.lrs_not_run == ""
    assert "stopped early (search.stop, left out): 2^-12..2^-8" in row.note
    assert "not run" not in row.note


def test_the_stability_table_counts_cells_stopped_early_apart_from_lrs_not_run(stopped):
    """It counted the five stopped LRs as not run, where lr_opt said they were stopped."""
    from mutransfer.analysis import views

    row = stopped.stability.set_index("width").loc[128]
    assert row.n_lrs_stopped == 5 and row.n_lrs_not_run == 0
    shown = views.view_stability(stopped).set_index("width").loc["128"]
    assert shown["stopped early"] == "5" and shown["not run"] == "0"


def test_the_loss_plot_draws_stopped_cells_apart_from_lrs_not_run(stopped, tmp_path,
                                                                  monkeypatch):
    from mutransfer.analysis import plots

    drawn = []
    real = plots._on_edge

    def spy(ax, x, y, marker, **kw):
        drawn.append((marker, sorted(np.round(np.log2(x), 6))))
        return real(ax, x, y, marker, **kw)

    monkeypatch.setattr(plots, "_on_edge", spy)
    plots.plot_loss_vs_lr(stopped, tmp_path / "loss.png")
    assert ("v", [-12, -11, -10, -9, -8]) in drawn       # stopped early
    assert all(not xs for m, xs in drawn if m == "|")    # nothing is "not run"


def test_a_single_trained_lr_is_not_called_a_bound(tmp_path):
    """One LR per width: nothing is known of the optimum on either side of it."""
    t = synthetic_tables([Planted("sp", 2**-7, 0.0)], [64, 128], [2.0**-7], [0, 1])
    a = analyze(write_results(tmp_path / "store", t))
    notes = a.lr_opt["note"].tolist()
    assert all("bounds the optimum on neither side" in n for n in notes), notes
    assert not any("is a bound" in n for n in notes)


def test_an_edge_optimum_at_the_middle_of_three_widths_does_not_move_the_slope(tmp_path):
    """The least-squares slope over 64, 128, 256 weighs 128 by 0: its bound decides nothing,
    and the bound comes from the other edge optima alone."""
    from mutransfer.analysis.drift import WidthFit, edge_bound

    a = _edge_store(tmp_path, [Planted("sp", 2**-6, 0.0)], widths=(64, 128, 256))
    x = np.log2(a.lr_opt["width"].to_numpy(float))

    def bound(sides: list[str]) -> str:
        rows = a.lr_opt.assign(edge_side=sides, edge=[bool(s) for s in sides])
        return edge_bound(WidthFit(rows, rows["width"].to_numpy(), x, None, ""))

    assert bound(["", "high", ""]) == "unaffected"
    assert bound(["low", "high", ""]) == "lower"    # lr*_64 at most its value: slope at least
    assert bound(["", "only", "high"]) == "lower"   # 128's single LR weighs nothing
    assert bound(["only", "", ""]) == "none"


def test_the_lr_star_plot_says_which_bound_an_edge_drift_is(tmp_path, monkeypatch):
    """The legend gave 'sp: slope +0.00' for two optima above the grid, a number that says
    nothing; it now qualifies it as the drift table does."""
    from mutransfer.analysis import plots

    a = _edge_store(tmp_path, [Planted("sp", 2**-2, 0.0), Planted("mup", 2**-6, 3.0)])
    labels = []
    real = plots.save

    def keep(fig, path):
        labels.extend(t.get_text() for ax in fig.axes if ax.get_legend()
                      for t in ax.get_legend().get_texts())
        return real(fig, path)

    monkeypatch.setattr(plots, "save", keep)
    plots.plot_lr_opt(a, tmp_path / "lr_opt.png")
    assert any(t.startswith("sp: slope") and t.endswith("(not a bound)") for t in labels)
    assert any(t.startswith("mup: slope") and t.endswith("(a lower bound)") for t in labels)


def test_the_stability_slope_names_a_width_where_every_lr_diverged(tmp_path):
    """Such a width bounds the boundary from above, which the bracket fit cannot take; it was
    left out of the slope without a word (only its `widths` column showed it)."""
    p = Planted("sp", 2**-7, 0.0, stable_base=2**-5, stable_exponent=-1.0)
    t = synthetic_tables([p], [64, 128, 256], [2.0**e for e in range(-10, -3)], [0, 1])
    tr = t.trials
    hit = tr.width == 256
    tr.loc[hit, ["status", "diverged", "final_eval_loss", "best_eval_loss"]] = \
        ["diverged", True, np.nan, np.nan]
    a = analyze(write_results(tmp_path / "store", t))
    row = a.stability_slope.iloc[0]
    assert row.widths == "64,128" and np.isfinite(row.slope)
    assert "left out: width 256 (its boundary lies below the LRs run)" in row.note
