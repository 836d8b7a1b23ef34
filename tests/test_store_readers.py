"""Any Parquet reader reads a results folder: pandas, pyarrow.dataset, DuckDB and polars read
trials/ and steps/ of a store that holds complete, diverged and failed trials, a trial still
running and a damaged part set aside, and they see the rows `read_tables` returns."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from mutransfer.results.schema import STEP_SCHEMA, trial_schema
from mutransfer.results.store import Store, read_tables
from mutransfer.sweep.run.trainable import TrialUnit, base_row


def report(step: int, loss: float) -> dict:
    return {"step": step, "tokens": step * 32, "train_loss": loss if step else math.nan,
            "eval_loss": loss, "lr": 0.01, "grad_norm": 1.0, "tokens_per_s": 100.0}


AXES = {"train.steps": "int64", "param.overrides.ssm_B.lr_mult": "float64"}


def payload(tid: str, lr: float) -> TrialUnit:
    """What a sweep hands a trial: its id, the axis columns (two extra axes) and config."""
    return TrialUnit(config={"width": 32},
                     columns={"width": 32, "parameterization": "mup", "lr": lr, "seed": 0,
                              "optimizer": "adamw", "train.steps": 10,
                              "param.overrides.ssm_B.lr_mult": 0.5},
                     trial_id=tid, search="grid", axes=AXES)


def finished(store: Store, tid: str, lr: float, status: str) -> None:
    """A trial as run_unit stores it: steps while it runs, then the trial row."""
    attempt = store.start_attempt(tid)
    steps = (0, 5) if status == "diverged" else (0, 5, 10)
    for s in steps:
        attempt.write_step(report(s, 3.0 - s / 10))
    outcome = {"status": status, "diverged": status == "diverged",
               "diverge_step": 7 if status == "diverged" else None,
               # a diverged trial has no final or best loss: only its last finite one
               "final_eval_loss": None if status == "diverged" else 2.0,
               "best_eval_loss": None if status == "diverged" else 2.0,
               "last_finite_loss": 2.5 if status == "diverged" else 2.0,
               "initial_loss": 3.0, "steps_done": steps[-1], "tokens": 320, "wall_time_s": 1.0,
               "tokens_per_s": 320.0}
    row = {**base_row(payload(tid, lr), "s", outcome, host="h"), "error": None}
    assert attempt.finish(row, AXES)


def failed(store: Store, tid: str, lr: float) -> None:
    """A failure as the sweep's callback records it: no losses, no host, an error."""
    row = {**base_row(payload(tid, lr), "s", {"diverged": False, "diverge_step": None}),
           "attempt": "", "evals": 0, "error": "RuntimeError: boom"}
    assert store.write_failure(row, AXES)


@pytest.fixture
def store_dir(tmp_path):
    store = Store(tmp_path / "results")
    store.ensure_writable()
    finished(store, "aaaa", 0.001, "complete")
    finished(store, "bbbb", 0.01, "diverged")
    failed(store, "cccc", 0.1)
    finished(store, "dddd", 0.003, "complete")
    running = store.start_attempt("eeee")  # still running: its steps are not results yet
    running.write_step(report(0, 3.0))
    damaged = tmp_path / "results" / "trials" / "part-dddd.parquet"
    damaged.write_bytes(damaged.read_bytes()[:50])  # a crash mid-write
    state = store.scan(repair=True)
    assert len(state.set_aside) == 2  # the damaged part and its steps moved to quarantine/
    running.write_step(report(5, 2.9))  # ... while the trial runs on
    return tmp_path / "results"


def test_pandas_reads_each_table_folder_as_read_tables_does(store_dir):
    tables = read_tables(store_dir)
    trials = pd.read_parquet(store_dir / "trials")
    steps = pd.read_parquet(store_dir / "steps")
    assert sorted(trials["trial_id"]) == sorted(tables.trials["trial_id"]) == \
        ["aaaa", "bbbb", "cccc"]
    assert len(steps) == len(tables.steps) == 5  # 3 + 2 rows; none of the running trial
    assert sorted(map(tuple, steps[["trial_id", "step"]].values.tolist())) == \
        sorted(map(tuple, tables.steps[["trial_id", "step"]].values.tolist()))
    by_id = trials.set_index("trial_id")
    assert by_id.loc["cccc", "error"] == "RuntimeError: boom"
    assert pd.isna(by_id.loc["cccc", "final_eval_loss"]) and pd.isna(by_id.loc["cccc", "host"])
    assert pd.isna(by_id.loc["bbbb", "final_eval_loss"])
    assert by_id.loc["bbbb", "last_finite_loss"] == 2.5


def test_every_part_has_the_one_schema(store_dir):
    expected = trial_schema(AXES)
    for part in (store_dir / "trials").iterdir():
        assert ds.dataset(part).schema.remove_metadata() == expected, part.name
    for part in (store_dir / "steps").iterdir():
        assert ds.dataset(part).schema.remove_metadata() == STEP_SCHEMA, part.name
    extra = [f.name for f in expected][7:9]  # the axis columns come after optimizer
    assert extra == list(AXES)


def test_pyarrow_dataset_counts_the_rows_of_read_tables(store_dir):
    tables = read_tables(store_dir)
    trials = ds.dataset(store_dir / "trials", format="parquet").to_table()
    steps = ds.dataset(store_dir / "steps", format="parquet").to_table()
    assert trials.num_rows == len(tables.trials) == 3
    assert steps.num_rows == len(tables.steps) == 5
    assert trials.schema.field("error").type == pa.string()


def test_duckdb_reads_both_folders(store_dir):
    duckdb = pytest.importorskip("duckdb")
    tables = read_tables(store_dir)
    def count(table: str) -> int:
        return duckdb.sql(f"SELECT count(*) FROM '{store_dir}/{table}/*.parquet'").fetchall()[0][0]

    n_trials, n_steps = count("trials"), count("steps")
    assert (n_trials, n_steps) == (len(tables.trials), len(tables.steps)) == (3, 5)
    failed_rows = duckdb.sql(f"SELECT trial_id, error FROM '{store_dir}/trials/*.parquet' "
                             f"WHERE status = 'failed'").fetchall()
    assert failed_rows == [("cccc", "RuntimeError: boom")]


def test_polars_reads_both_folders(store_dir):
    pl = pytest.importorskip("polars")
    tables = read_tables(store_dir)
    trials = pl.scan_parquet(f"{store_dir}/trials/*.parquet").collect()
    steps = pl.scan_parquet(f"{store_dir}/steps/*.parquet").collect()
    assert (trials.height, steps.height) == (len(tables.trials), len(tables.steps)) == (3, 5)
    assert sorted(trials["trial_id"].to_list()) == sorted(tables.trials["trial_id"])


def test_the_running_attempt_and_the_damaged_part_are_outside_the_tables(store_dir):
    assert sorted(p.name for p in (store_dir / "quarantine" / "trials").iterdir()) == \
        ["part-dddd.parquet"]
    assert len(list((store_dir / "running").iterdir())) == 1  # eeee's step 5
    live = read_tables(store_dir, include_running=True).steps
    assert set(live["trial_id"]) == {"aaaa", "bbbb", "eeee"}


def test_parts_set_aside_by_older_versions_move_out_of_the_tables(tmp_path):
    store = Store(tmp_path)
    finished(store, "aaaa", 0.001, "complete")
    old = tmp_path / "trials" / "part-zzzz.parquet.corrupt"
    old.write_bytes(b"PAR1 half")
    store.scan(repair=True)
    assert not old.exists() and (tmp_path / "quarantine" / "trials" / "part-zzzz.parquet").exists()
    assert len(pd.read_parquet(tmp_path / "trials")) == 1
