"""What the analysis makes of stores an outside user produces (a probe, 2026-11-30): widths
that are not whole numbers, a linear target's columns in its own units, and regret read from
an lr* that is only a bound. Each number the tables give means what its column says, or a
note says what it rests on.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis import analyze
from mutransfer.analysis.views import view_lr_opt
from mutransfer.results.store import Tables
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import synthetic_tables, write_results


def test_rows_whose_width_is_not_whole_are_left_out_with_a_note_not_cut_to_an_integer(tmp_path):
    """A table from another program may hold a width multiplier (0.5, 1, 2) or a width
    written 48.5. The store's reader refuses them only when it reads the parts; given the
    tables (analyze(path, tables=...)), the analysis cut 0.5 to 0 and 48.5 to 48: log2 0 =
    -inf, and the quickstart's drifts read -0.103 and -1.075 for +0.026 and -0.781, with no
    note."""
    t = synthetic_tables([SP, MUP], [64, 128, 256], LR_GRID, [0, 1])
    clean = analyze(write_results(tmp_path / "clean", t))
    odd = t.trials.copy()
    odd["width"] = odd["width"].astype(float).where(odd["width"] != 64, 0.5)
    a = analyze(tmp_path / "none", tables=Tables(odd, t.steps))
    assert a.widths == [128, 256]
    assert any("left out as damaged" in n and "a width not whole" in n for n in a.notes)
    pd.testing.assert_series_equal(
        a.lr_opt["lr_opt"].reset_index(drop=True),
        clean.lr_opt.loc[clean.lr_opt["width"] != 64, "lr_opt"].reset_index(drop=True))


def test_a_linear_targets_one_lr_shift_is_in_the_units_of_its_interval(tmp_path):
    """A weight decay swept 0, 0.05, .. 0.3 is fitted in grid steps and its interval given in
    its own units; its one-LR shift (and se_seeds_log2, grid_step) stayed in grid steps: a
    shift of 0.023 steps (0.0012) read '0.02' beside an interval of half-width 0.006, yet
    unflagged."""
    grid = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
    t = axes_tables({"width": [64, 128, 256]}, "train.weight_decay", grid,
                    lambda p: 0.1 + 0.05 * np.log2(p["width"] / 64), [0, 1, 2], log=False,
                    curvature=20.0, fixed={"lr": 1e-3})
    a = analyze(write_results(tmp_path / "store", t), target="train.weight_decay")
    step = a.choice.step
    opt = a.lr_opt
    np.testing.assert_allclose(opt["grid_step"], step)
    half = (opt["ci_high"] - opt["ci_low"]) / 2
    assert ((opt["one_lr_shift"] > half) == opt["one_lr_flag"]).all()
    assert (opt["one_lr_shift"] < step).all()  # a fraction of one step, in its units
    assert (opt["se_seeds_log2"] <= opt["se_log2"]).all()  # the same units as se_log2
    shown = view_lr_opt(a)["one-LR shift"].str.rstrip(" !").astype(float)
    np.testing.assert_allclose(shown, opt["one_lr_shift"], rtol=0.01)


def test_regret_from_an_lr_star_on_the_grids_edge_says_it_is_the_regret_of_a_bound(tmp_path):
    """When the smallest width's optimum lies on the grid's edge (lr* is a bound, not an
    estimate), the regret table gave regrets (0.0527, 0.1830 on the quickstart with its
    width-32 LRs above 2^-5 left out) as if lr* were known: now each row says so."""
    t = synthetic_tables([SP], [64, 128, 256], LR_GRID, [0, 1])
    lr_star_64 = SP.lr_opt(64, 64)
    trials = t.trials
    t.trials = trials[~((trials["width"] == 64) & (trials["lr"] > lr_star_64 / 2))]
    a = analyze(write_results(tmp_path / "store", t))
    first = a.lr_opt.sort_values("width").iloc[0]
    assert first["edge_side"] == "high"
    assert len(a.regret) == 3
    assert a.regret["note"].str.contains("is a bound on the grid's high edge").all()
    # an lr* that is an estimate gives no such note
    clean = analyze(write_results(tmp_path / "clean", synthetic_tables([SP], [64, 128, 256],
                                                                        LR_GRID, [0, 1])))
    assert not clean.regret["note"].str.contains("bound").any()


def test_a_store_whose_trials_are_all_still_running_says_so_not_only_no_trials(tmp_path,
                                                                                capsys):
    """The first minutes of a sweep: trials started (their evals in running/), none finished.
    Before: 'no trials in STORE ...: nothing to analyze', as for an empty folder."""
    from mutransfer.cli import main
    from mutransfer.results.fs import write_part_atomic

    t = synthetic_tables([SP], [64], LR_GRID[:3], [0])
    root = write_results(tmp_path / "store", t)
    (root / "trials" / "part-all.parquet").unlink()
    (root / "steps" / "part-all.parquet").unlink()
    for (tid, attempt), rows in t.steps.groupby(["trial_id", "attempt"]):
        write_part_atomic(rows.iloc[:2], root / "running" / f"part-{tid}-{attempt}-0.parquet")
    assert main(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert "no trials in" in err and "3 trials started and none finished yet" in err


def test_a_store_part_with_a_width_that_is_not_whole_is_read_and_its_row_left_out(tmp_path):
    """A trial part written by another program with width 64.5: the store's reader gave a
    TypeError traceback ('cannot safely cast non-equivalent float64 to int64') to analyze,
    plot and every other reader; now the row reaches the analysis, which leaves it out."""
    from mutransfer.cli import main
    from mutransfer.results.store import Store

    tables = synthetic_tables([SP], [64, 128, 256], LR_GRID, [0, 1])
    store = write_results(tmp_path / "s", tables, per_trial=True)
    part = sorted((store / "trials").glob("*.parquet"))[0]
    df = pd.read_parquet(part)
    df["width"] = df["width"].astype(float) + 0.5
    df.to_parquet(part, index=False)
    assert Store(str(store)).tables().trials["width"].dtype == "float64"
    assert main(["analyze", str(store), "--out", str(tmp_path / "out")]) == 0
