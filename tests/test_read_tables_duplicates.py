"""`read_tables` on a store where a trial id has more than one row in trials/ (a part copied
beside itself, a failed attempt's row kept beside the finished one, two stores merged).

A sweep writes one part per trial, so such a store was not written by one sweep; what counts
is the trial's finished attempt (docs/results-format.md). `read_tables` gives each trial id
once, the row `analyze` counts, with the steps of that row's attempt; it warns, and the rows
it left out are `Tables.duplicates`."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mutransfer import read_tables
from mutransfer.analysis import analyze
from mutransfer.results.fs import write_part_atomic
from mutransfer.results.store import Store, Tables
from tests.sweeps import LR_GRID, SP
from tests.synthetic_sweeps import synthetic_tables, write_results

DUPLICATES = "trial rows left out as duplicates"


def _store(root: Path) -> Path:
    """A planted store as a sweep writes it: one trials part per trial, one steps part per
    trial's attempt."""
    return write_results(root, synthetic_tables([SP], [64, 128], LR_GRID, [0, 1]),
                         per_trial=True)


def _parts(root: Path) -> list[Path]:
    return sorted((root / "trials").glob("part-*.parquet"))


def _second_row(root: Path, part: Path, **values) -> pd.Series:
    """A second row of `part`'s trial, `values` changed, in a part that sorts before it (so
    it is read first); its steps, when it names a new finished attempt, beside it."""
    row = pd.read_parquet(part)
    for col, value in values.items():
        row[col] = value
    write_part_atomic(row, part.with_name(part.stem + " (copy).parquet"))
    tid, attempt = row["trial_id"].item(), row["attempt"].item()
    old = next((root / "steps").glob(f"part-{tid}-*.parquet"))
    if not old.name.endswith(f"-{attempt}.parquet") and row["status"].item() != "failed":
        steps = pd.read_parquet(old).assign(attempt=attempt, eval_loss=lambda s: s.eval_loss + 1)
        write_part_atomic(steps, root / "steps" / f"part-{tid}-{attempt}.parquet")
    return row.iloc[0]


def _read(root: Path) -> tuple[Tables, str]:
    """read_tables(root) and what it warned, one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = read_tables(root)
    return tables, "\n".join(str(w.message) for w in caught)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = _store(tmp_path_factory.mktemp("clean") / "store")
    return read_tables(root), analyze(root)


def test_a_copied_trials_part_is_read_once_with_a_warning(tmp_path, clean):
    """Before: each copied part was one more row of its trial in `trials`."""
    root = _store(tmp_path / "store")
    for part in _parts(root)[:3]:
        shutil.copy(part, part.with_name(part.stem + " (copy).parquet"))
    t, warned = _read(root)
    assert not t.trials["trial_id"].duplicated().any()
    pd.testing.assert_frame_equal(t.trials.sort_values("trial_id", ignore_index=True),
                                  clean[0].trials.sort_values("trial_id", ignore_index=True))
    pd.testing.assert_frame_equal(t.steps, clean[0].steps)
    assert f"3 {DUPLICATES}: 3 trial ids appear in more than one row of trials/" in warned
    assert len(t.duplicates) == 3


def test_of_a_failed_and_a_finished_row_of_one_trial_the_finished_one_is_read(tmp_path, clean):
    """The failed row (an earlier attempt) is read first, yet the finished attempt counts,
    as in the analysis."""
    root = _store(tmp_path / "store")
    part = _parts(root)[0]
    failed = _second_row(root, part, status="failed", final_eval_loss=np.nan, error="boom",
                         attempt="earlier")
    t, warned = _read(root)
    row = t.trials[t.trials["trial_id"] == failed["trial_id"]]
    assert row["status"].tolist() == ["complete"]
    pd.testing.assert_frame_equal(t.steps, clean[0].steps)
    assert f"1 {DUPLICATES}" in warned and t.duplicates["status"].tolist() == ["failed"]


def test_of_two_finished_rows_the_steps_read_are_those_of_the_row_read(tmp_path):
    """Two stores merged, each with its own finished attempt of one trial. Before: trials
    held both rows and steps the attempt of the row read last, so the row read first (the
    one `analyze` counts) came without its steps."""
    root = _store(tmp_path / "store")
    other = _second_row(root, _parts(root)[0], attempt="merged", final_eval_loss=9.0)
    t, warned = _read(root)
    row = t.trials[t.trials["trial_id"] == other["trial_id"]]
    assert row["attempt"].tolist() == ["merged"] and row["final_eval_loss"].tolist() == [9.0]
    steps = t.steps[t.steps["trial_id"] == other["trial_id"]]
    assert len(steps) == other["evals"] and set(steps["attempt"]) == {"merged"}
    assert f"1 {DUPLICATES}" in warned


def test_the_analysis_of_tables_read_so_counts_each_trial_once_and_says_so(tmp_path, clean):
    root = _store(tmp_path / "store")
    for part in _parts(root)[:2]:
        shutil.copy(part, part.with_name(part.stem + " (copy).parquet"))
    tables, _ = _read(root)
    for a in (analyze(root), analyze(root, tables=tables)):
        assert a.n_trials == clean[1].n_trials
        pd.testing.assert_frame_equal(a.cells, clean[1].cells)
        assert any(n.startswith(f"2 {DUPLICATES}: 2 trial ids") for n in a.notes), a.notes


def test_a_sweep_does_not_count_a_finished_trial_as_failed_for_a_copied_failed_row(tmp_path):
    """Before: the scan put the trial both among the complete and among the failed ones."""
    root = _store(tmp_path / "store")
    failed = _second_row(root, _parts(root)[0], status="failed", final_eval_loss=np.nan,
                         error="boom", attempt="earlier")
    state = Store(root).scan(repair=False)
    assert failed["trial_id"] in state.complete and not state.failed


def test_a_store_without_duplicates_reads_as_before_without_a_warning(tmp_path, clean):
    t, warned = _read(_store(tmp_path / "store"))
    assert warned == "" and len(t.trials) == len(clean[0].trials)
