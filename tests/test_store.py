"""The Parquet results store: atomic parts, attempts that never duplicate steps, damaged parts
set aside, and the tables read back through one function."""

from __future__ import annotations

import math
import os
import warnings

import pandas as pd
import pytest
import yaml

from mutransfer.cli import main
from mutransfer.errors import UserError
from mutransfer.results.store import (
    MARKER,
    STEP_COLUMNS,
    TRIAL_COLUMNS,
    Store,
    read_tables,
    write_part_atomic,
)


def report(step: int, loss: float = 3.0) -> dict:
    return {"step": step, "tokens": step * 32, "train_loss": loss if step else math.nan,
            "eval_loss": loss, "lr": 0.01, "grad_norm": 1.0, "tokens_per_s": 100.0}


def row(status: str = "complete", width: int = 32, lr: float = 0.01) -> dict:
    return {"sweep": "s", "width": width, "parameterization": "sp", "lr": lr, "seed": 0,
            "optimizer": "adamw", "status": status, "diverged": status == "diverged",
            "diverge_step": 7 if status == "diverged" else None, "final_eval_loss": 3.0,
            "best_eval_loss": 2.9, "initial_loss": 5.5, "steps_done": 10, "tokens": 320,
            "wall_time_s": 1.0, "tokens_per_s": 320.0, "search": "grid", "host": "h",
            "versions": "{}", "config": "{}", "error": None}


def run_trial(store: Store, tid: str, steps=(0, 5, 10), status="complete") -> None:
    attempt = store.start_attempt(tid)
    for s in steps:
        attempt.write_step(report(s))
    assert attempt.finish(row(status))


def files(folder) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_empty_store_reads_as_empty_tables_with_the_documented_columns(tmp_path):
    tables = read_tables(tmp_path / "none")
    assert list(tables.trials.columns) == TRIAL_COLUMNS and len(tables.trials) == 0
    assert list(tables.steps.columns) == STEP_COLUMNS and len(tables.steps) == 0


def test_a_finished_trial_has_one_trial_row_and_its_steps_once(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa", steps=(0, 5, 10))
    run_trial(store, "bbbb", steps=(0, 5), status="diverged")
    tables = read_tables(tmp_path)
    assert sorted(tables.trials["trial_id"]) == ["aaaa", "bbbb"]
    assert tables.steps.groupby("trial_id")["step"].apply(list).to_dict() == \
        {"aaaa": [0, 5, 10], "bbbb": [0, 5]}
    div = tables.trials.set_index("trial_id").loc["bbbb"]
    assert div["status"] == "diverged" and div["diverged"] and div["diverge_step"] == 7
    assert tables.trials["width"].dtype == "int64" and tables.steps["step"].dtype == "int64"
    # per-report parts were compacted into one part per trial; no temp files remain
    assert files(tmp_path / "steps") == sorted(
        f"part-{t}-{a}.parquet" for t, a in zip(tables.trials["trial_id"],
                                                tables.trials["attempt"]))
    assert files(tmp_path / "trials") == ["part-aaaa.parquet", "part-bbbb.parquet"]
    assert set(store.scan().complete) == {"aaaa", "bbbb"}


def test_steps_are_on_disk_while_a_trial_runs_outside_the_steps_table(tmp_path):
    store = Store(tmp_path)
    attempt = store.start_attempt("aaaa")
    attempt.write_step(report(0))
    attempt.write_step(report(5))
    assert len(files(tmp_path / "running")) == 2
    assert files(tmp_path / "steps") == []  # steps/ holds finished attempts only
    assert len(read_tables(tmp_path, include_running=True).steps) == 2
    assert len(read_tables(tmp_path).steps) == 0  # not finished: not part of the results
    assert "aaaa" not in store.scan().complete


def test_a_crashed_attempt_never_duplicates_steps_of_the_rerun(tmp_path):
    store = Store(tmp_path)
    crashed = store.start_attempt("aaaa")
    crashed.write_step(report(0, 9.0))
    crashed.write_step(report(5, 9.0))  # then the process dies
    rerun = store.start_attempt("aaaa")  # removes the crashed attempt's parts
    assert files(tmp_path / "steps") == []
    rerun.write_step(report(0))
    crashed.write_step(report(10, 9.0))  # a zombie of the old attempt still writing
    rerun.write_step(report(5))
    rerun.write_step(report(10))
    assert rerun.finish(row())
    steps = read_tables(tmp_path).steps
    assert list(steps["step"]) == [0, 5, 10] and set(steps["eval_loss"]) == {3.0}
    state = store.scan(repair=True)  # housekeeping: the zombie's part is deleted
    assert "aaaa" in state.complete
    assert files(tmp_path / "steps") == [f"part-aaaa-{rerun.token}.parquet"]


def test_a_stored_trial_is_never_rewritten(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    part = tmp_path / "trials" / "part-aaaa.parquet"
    before = (part.stat().st_ino, part.stat().st_mtime_ns)
    late = store.start_attempt("aaaa")
    late.write_step(report(0, 1.0))
    assert not late.finish({**row(), "final_eval_loss": 1.0})
    assert not store.write_failure({**row(), "trial_id": "aaaa", "error": "boom"})
    assert (part.stat().st_ino, part.stat().st_mtime_ns) == before
    assert read_tables(tmp_path).trials["final_eval_loss"].tolist() == [3.0]


def test_a_failure_is_recorded_and_does_not_count_as_complete(tmp_path):
    store = Store(tmp_path)
    assert store.write_failure({**row(), "trial_id": "ffff", "error": "RuntimeError: boom"})
    state = store.scan()
    assert state.failed == {"ffff": "RuntimeError: boom"} and not state.complete
    run_trial(store, "ffff")  # a later run of the cell replaces the failure record
    assert "ffff" in store.scan().complete


def test_a_truncated_part_is_set_aside_and_its_trial_runs_again(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    run_trial(store, "bbbb")
    part = tmp_path / "trials" / "part-bbbb.parquet"
    part.write_bytes(part.read_bytes()[:40])  # a crash mid-write on a filesystem without rename
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_tables(tmp_path).trials["trial_id"].tolist() == ["aaaa"]
    assert any("unreadable" in str(w.message) for w in caught)
    dry = store.scan(repair=False)
    assert dry.corrupt == [str(part)] and part.exists()  # a dry scan changes nothing
    state = store.scan(repair=True)
    assert set(state.complete) == {"aaaa"}
    quarantined = tmp_path / "quarantine" / "trials" / "part-bbbb.parquet"
    assert state.set_aside[0] == str(quarantined) and quarantined.exists()
    attempt = read_tables(tmp_path).trials["attempt"][0]
    assert files(tmp_path / "steps") == [f"part-aaaa-{attempt}.parquet"]  # bbbb's went too
    assert files(tmp_path / "trials") == ["part-aaaa.parquet"]  # moved out of the table
    run_trial(store, "bbbb")
    assert set(store.scan().complete) == {"aaaa", "bbbb"}


def test_a_trial_whose_steps_are_lost_is_incomplete(tmp_path):
    store = Store(tmp_path)
    run_trial(store, "aaaa")
    for name in files(tmp_path / "steps"):
        os.remove(tmp_path / "steps" / name)
    state = store.scan(repair=True)
    assert not state.complete
    assert files(tmp_path / "trials") == []
    assert files(tmp_path / "quarantine" / "trials") == ["part-aaaa.parquet"]


def test_write_is_atomic_a_failed_write_leaves_the_old_part(tmp_path, monkeypatch):
    from mutransfer.results import store as store_module

    target = tmp_path / "trials" / "part-x.parquet"
    write_part_atomic(pd.DataFrame({"a": [1]}), target)

    def disk_full(table, sink, **kw):
        sink.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module.pq, "write_table", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_part_atomic(pd.DataFrame({"a": [2]}), target)
    monkeypatch.undo()
    assert pd.read_parquet(target)["a"].tolist() == [1]
    assert files(tmp_path / "trials") == ["part-x.parquet"]  # no temp file left behind


def test_a_uri_location_works_like_a_path(tmp_path):
    store = Store(f"file://{tmp_path}")
    run_trial(store, "aaaa")
    assert read_tables(f"file://{tmp_path}").trials["trial_id"].tolist() == ["aaaa"]
    assert read_tables(tmp_path).steps["step"].tolist() == [0, 5, 10]


def test_unwritable_storage_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(UserError, match="not writable"):
        Store(blocker / "results").ensure_writable()


def test_parts_written_without_attempts_still_read(tmp_path):
    """Tables written by other tools (or older versions) have no attempt columns."""
    write_part_atomic(pd.DataFrame([{**row(), "trial_id": "old1"}]),
                      tmp_path / "trials" / "part-old1.parquet")
    write_part_atomic(pd.DataFrame([{**report(0), "trial_id": "old1"},
                                    {**report(5), "trial_id": "old1"}]),
                      tmp_path / "steps" / "part-old1-0.parquet")
    tables = read_tables(tmp_path)
    assert tables.steps["step"].tolist() == [0, 5]
    assert "old1" in Store(tmp_path).scan().complete


def test_a_late_attempt_whose_steps_a_new_attempt_removed_does_not_count(tmp_path, monkeypatch):
    """A worker of a killed driver finishes late: its steps part lands, the next driver's
    attempt of the trial starts and removes it, then its trial part lands. That part names
    steps that are gone: it does not make the trial complete, and the new attempt, when it
    finishes, stores its own steps and row instead of throwing them away."""
    from mutransfer.results import store as store_module

    store = Store(tmp_path)
    late = store.start_attempt("aaaa")
    for s in (0, 5, 10):
        late.write_step(report(s, 9.0))
    attempts = []
    write = store_module.write_part_atomic

    def new_attempt_starts_before_the_trial_part(data, target, fs=None):
        if "/trials/" in str(target) and not attempts:
            attempts.append(store.start_attempt("aaaa"))
        write(data, target, fs)

    monkeypatch.setattr(store_module, "write_part_atomic",
                        new_attempt_starts_before_the_trial_part)
    assert late.finish(row())
    monkeypatch.undo()
    assert not store.is_complete("aaaa")  # its row is there, its steps are not
    new = attempts[0]
    for s in (0, 5, 10):
        new.write_step(report(s))
    assert new.finish(row())
    tables = read_tables(tmp_path)
    assert tables.trials["attempt"].tolist() == [new.token]
    assert tables.steps["step"].tolist() == [0, 5, 10] and set(tables.steps["eval_loss"]) == {3.0}


@pytest.mark.parametrize("inner", ["analysis/again", "steps/x"])
def test_a_store_inside_another_store_is_refused_in_one_line(tmp_path, capsys, inner):
    """A sweep inside another store's folder would put its parts among that store's tables
    (steps/x/...) or its analysis."""
    outer = tmp_path / "results" / "outer"
    outer.mkdir(parents=True)
    (outer / MARKER).write_text("{}")
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", "model": {"base_width": 16},
                                    "axes": {"width": [16], "lr": [0.01]}}))
    before = sorted(tmp_path.rglob("*"))
    rc = main(["sweep", str(path), "--storage", str(outer / inner), "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert f"inside the results store {outer}" in err
    assert sorted(tmp_path.rglob("*")) == before
