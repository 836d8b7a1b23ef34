"""`analyze` and `plot` on odd but valid stores and on partly damaged ones (an audit,
2026-11-29).

Each test is one shape a store can take (a trial row written twice, a row that names no cell,
a table without a column the analysis reads, a figure an earlier analysis drew) and what the
analysis must make of it: a useful result with a note naming what it left out, or one line
(`error: ...`, exit code 2, nothing written); never a traceback or a row counted twice.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze
from mutransfer.cli import main
from mutransfer.errors import UserError
from mutransfer.results.fs import write_part_atomic
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_sweeps import synthetic_tables, write_results

WIDTHS = [64, 128]


def _tables():
    return synthetic_tables([SP, MUP], WIDTHS, LR_GRID, [0, 1])


def _store(root, edit=None, steps: bool = True, per_trial: bool = False):
    """A planted store at `root`, its trials table passed through `edit` first."""
    t = _tables()
    if edit is not None:
        t.trials = edit(t.trials.copy())
    if not steps:
        t.steps = t.steps.iloc[:0]
    return write_results(root, t, per_trial=per_trial)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return analyze(_store(tmp_path_factory.mktemp("clean") / "store"))


# -- a trial in two rows ----------------------------------------------------------------------


def test_a_trial_row_written_twice_is_counted_once(tmp_path, clean):
    """Before: every duplicated row was one more seed of its cell (n_trials 3 of 2 seeds, its
    mean weighted toward the copy) and one more trial in the header."""
    root = _store(tmp_path / "store", lambda t: pd.concat([t, t.iloc[:5]], ignore_index=True))
    a = analyze(root)
    assert a.n_trials == clean.n_trials
    assert (a.cells["n_trials"] <= 2).all()
    pd.testing.assert_frame_equal(a.cells, clean.cells)
    np.testing.assert_array_equal(a.lr_opt["lr_opt"], clean.lr_opt["lr_opt"])
    assert any(n.startswith("5 trial rows left out as duplicates") for n in a.notes)


def test_a_copied_trials_part_is_counted_once(tmp_path, clean):
    root = _store(tmp_path / "store", per_trial=True)
    for part in sorted((root / "trials").glob("part-*.parquet"))[:3]:
        shutil.copy(part, part.with_name(part.stem + " (copy).parquet"))
    a = analyze(root)
    assert a.n_trials == clean.n_trials
    pd.testing.assert_frame_equal(a.cells, clean.cells)
    assert any("3 trial ids appear in more than one row" in n for n in a.notes)


def test_of_a_trial_in_two_rows_the_finished_row_counts_not_the_failed_one(tmp_path, clean):
    def edit(t):
        failed = t.iloc[:1].copy()
        failed[["status", "final_eval_loss", "error"]] = ["failed", np.nan, "boom"]
        return pd.concat([failed, t], ignore_index=True)

    a = analyze(_store(tmp_path / "store", edit))
    assert a.n_trials == clean.n_trials and a.n_failed == 0
    pd.testing.assert_frame_equal(a.cells, clean.cells)


# -- a row that names no cell ------------------------------------------------------------------


def _damage(col, value):
    def edit(t):
        t[col] = t[col].astype(object)
        t.loc[t.index[0], col] = value
        return t
    return edit


@pytest.mark.parametrize(("col", "value", "why"), [
    ("width", None, "no width > 0"), ("width", 0, "no width > 0"),
    ("lr", np.nan, "no LR > 0"), ("lr", 0.0, "no LR > 0"), ("lr", -1e-3, "no LR > 0"),
    ("lr", np.inf, "no LR > 0"), ("seed", None, "no whole seed"),
    ("parameterization", None, "no parameterization")])
def test_a_damaged_row_is_left_out_with_a_note_naming_why(tmp_path, capsys, col, value, why):
    """Before: a null width or seed, and an LR that is NaN or not > 0, ended in a traceback
    (casting NA to int64, log2 of the LR in a note); a width of 0 gave log2 warnings and a
    drift through -inf; a null parameterization made a family called `nan`."""
    root = _store(tmp_path / "store", _damage(col, value))
    a = analyze(root)
    assert a.n_trials == 71
    assert set(a.lr_opt["parameterization"]) == {"sp", "mup"}
    assert set(a.widths) == set(WIDTHS)
    assert any(n.startswith(f"1 trial rows left out as damaged (1 {why})") for n in a.notes)
    assert main(["analyze", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "left out as damaged" in out and "Traceback" not in err and "warning" not in err


def test_a_store_of_damaged_rows_only_is_one_line(tmp_path, capsys):
    root = _store(tmp_path / "store", lambda t: t.assign(lr=0.0))
    with pytest.raises(UserError, match=r"no trial of .* can be analyzed: 72 trial rows left "
                                        r"out as damaged \(72 no LR > 0\)"):
        analyze(root)
    assert main(["plot", str(root)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: no trial of") and err.count("\n") == 1
    assert not (root / "analysis").exists()


# -- a column the analysis reads is missing ------------------------------------------------------


@pytest.mark.parametrize("col", ["final_eval_loss", "parameterization"])
def test_a_trials_table_without_a_needed_column_is_one_line(tmp_path, capsys, col):
    """Before: KeyError tracebacks."""
    root = _store(tmp_path / "store", lambda t: t.drop(columns=[col]))
    for command in ("analyze", "plot"):
        assert main([command, str(root)]) == 2
        out, err = capsys.readouterr()
        assert err.startswith("error: ") and f"no {col}" in err.replace("'", "")
        assert err.count("\n") == 1 and "Traceback" not in err
    assert not (root / "analysis").exists()


def test_a_trials_table_without_status_is_read_by_its_diverged_column(tmp_path, clean):
    """Before: KeyError 'status' inside the store's reader, when it picks each trial's steps
    (a trials row is written when its trial ends: each counts as finished)."""
    a = analyze(_store(tmp_path / "store", lambda t: t.drop(columns=["status"])))
    pd.testing.assert_frame_equal(a.lr_opt, clean.lr_opt)
    pd.testing.assert_frame_equal(a.stability, clean.stability)


def test_a_trials_table_without_diverged_takes_it_from_the_status(tmp_path, clean):
    """Before: KeyError 'diverged'."""
    a = analyze(_store(tmp_path / "store", lambda t: t.drop(columns=["diverged"])))
    pd.testing.assert_frame_equal(a.cells, clean.cells)
    pd.testing.assert_frame_equal(a.stability, clean.stability)


# -- plot: its notes and its folder ------------------------------------------------------------


def _all_diverged(t):
    t["status"], t["diverged"] = "diverged", True
    t[["final_eval_loss", "best_eval_loss"]] = np.nan
    return t


def test_plot_says_nothing_trained_though_other_notes_come_first(tmp_path, capsys):
    """Before: `plot` printed the first note as the nothing-trained one, here the note that
    the trials come from two sweeps."""
    def edit(t):
        t = _all_diverged(t)
        t.loc[t["width"] == WIDTHS[1], "sweep"] = "extra"
        return t

    root = _store(tmp_path / "store", edit, steps=False)
    assert main(["plot", str(root)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("note: nothing trained: all 72 trials diverged")


def test_a_figure_an_earlier_plot_drew_and_this_one_does_not_is_removed(tmp_path, capsys):
    """Before: lr_opt_vs_width.png and training_curves.png of the earlier plot stayed beside
    a report.html without them (no lr* to draw; no step rows)."""
    root = _store(tmp_path / "store")
    assert main(["plot", str(root)]) == 0
    out = root / "analysis"
    assert (out / "lr_opt_vs_width.png").is_file() and (out / "training_curves.png").is_file()
    t = _tables()
    shutil.rmtree(root / "trials")
    shutil.rmtree(root / "steps")
    write_part_atomic(_all_diverged(t.trials), root / "trials" / "part-all.parquet")
    capsys.readouterr()
    assert main(["plot", str(root)]) == 0
    printed = capsys.readouterr().out
    assert not (out / "lr_opt_vs_width.png").exists()
    assert not (out / "training_curves.png").exists()
    assert (out / "loss_vs_lr.png").is_file() and (out / "stability_vs_width.png").is_file()
    assert "training_curves.png" not in printed and "lr_opt_vs_width.png" not in printed


def test_trials_whose_step_parts_are_missing_are_named_in_a_note(tmp_path, clean):
    """Before: the training curves silently averaged the seeds that still had steps."""
    root = _store(tmp_path / "store", per_trial=True)
    for part in sorted((root / "steps").glob("part-*.parquet"))[:3]:
        part.unlink()
    a = analyze(root)
    assert "3 finished trials have no step rows (their steps parts are missing)" in a.notes[-1]
    pd.testing.assert_frame_equal(a.lr_opt, clean.lr_opt)  # the tables do not need steps
    assert not any("no step rows" in n for n in clean.notes)
