"""A trials part without a `status` column (written by another program, or edited by hand)
holds no finished trial: its cell runs again and the new attempt's part replaces it. Before,
every attempt of that cell raised KeyError 'status' reading the old part (Store._done_row),
the sweep failed the cell for good on every run, and could not even record the failure."""

from __future__ import annotations

import pandas as pd

from mutransfer.results.store import Store, read_tables
from tests.test_store import report, row, run_trial


def _drop_status(store: Store, tid: str) -> None:
    path = store.trial_part(tid)
    pd.read_parquet(path).drop(columns=["status"]).to_parquet(path)


def test_a_trial_part_without_status_is_not_a_finished_trial(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    _drop_status(store, "aaaa")
    assert store.finished_row("aaaa") is None and not store.is_complete("aaaa")
    assert "aaaa" not in store.scan(repair=False).complete


def test_the_cell_of_a_part_without_status_runs_again_and_replaces_it(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    _drop_status(store, "aaaa")
    attempt = store.start_attempt("aaaa")
    for step in (0, 5, 10):
        attempt.write_step(report(step, 2.0))
    assert attempt.finish({**row(), "final_eval_loss": 2.0})
    tables = read_tables(tmp_path)
    assert tables.trials["status"].tolist() == ["complete"]
    assert tables.trials["final_eval_loss"].tolist() == [2.0]
    assert "aaaa" in store.scan(repair=False).complete


def test_a_failure_of_that_cell_is_recorded_over_the_part_without_status(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    _drop_status(store, "aaaa")
    assert store.write_failure({**row(), "trial_id": "aaaa", "error": "RuntimeError: boom"})
    assert store.scan(repair=False).failed == {"aaaa": "RuntimeError: boom"}
