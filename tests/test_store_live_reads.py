"""Reading a store while its sweep runs (read_tables(include_running=True), a dashboard or a
notebook polling it): a trial that finishes between the listing of its per-eval parts and
their reading is neither reported as damaged nor read with steps missing."""

from __future__ import annotations

import math
import warnings

from mutransfer.results.store import Store, read_tables
from mutransfer.sweep.run.trainable import TrialUnit, base_row

AXES: dict[str, str] = {}


def report(step: int, loss: float) -> dict:
    return {"step": step, "tokens": step * 32, "train_loss": loss if step else math.nan,
            "eval_loss": loss, "lr": 0.01, "grad_norm": 1.0, "tokens_per_s": 100.0}


def payload(tid: str, lr: float) -> TrialUnit:
    return TrialUnit(config={"width": 32},
                     columns={"width": 32, "parameterization": "mup", "lr": lr, "seed": 0,
                              "optimizer": "adamw"},
                     trial_id=tid, search="grid", axes=AXES)


def _finish_row(tid: str) -> dict:
    outcome = {"status": "complete", "diverged": False, "diverge_step": None,
               "final_eval_loss": 2.0, "best_eval_loss": 2.0, "last_finite_loss": 2.0,
               "initial_loss": 3.0, "steps_done": 10, "tokens": 320, "wall_time_s": 1.0,
               "tokens_per_s": 320.0}
    return {**base_row(payload(tid, 0.01), "s", outcome, host="h"), "error": None}


def _finishes_while_read(store: Store, monkeypatch):
    """A running attempt with three per-eval parts, which the sweep finishes (steps part,
    trial part, per-eval parts deleted) just as a reader opens the first of them."""
    attempt = store.start_attempt("aaaa")
    for step in (0, 5, 10):
        attempt.write_step(report(step, 3.0 - step / 10))
    read_part = Store.read_part

    def racing_read(self, path):
        if "/running/" in path and attempt.rows:
            assert attempt.finish(_finish_row("aaaa"), AXES)
            attempt.rows = []  # once
        return read_part(self, path)

    monkeypatch.setattr(Store, "read_part", racing_read)


def test_a_trial_finishing_during_a_live_read_is_read_whole_without_a_warning(tmp_path,
                                                                              monkeypatch):
    store = Store(tmp_path / "results")
    store.ensure_writable()
    _finishes_while_read(store, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "unreadable parts skipped" would raise here
        tables = read_tables(tmp_path / "results", include_running=True)
    assert sorted(tables.steps["step"]) == [0, 5, 10]
    assert set(tables.steps["trial_id"]) == {"aaaa"}


def test_a_part_that_is_really_damaged_is_still_reported(tmp_path):
    """Only a part that vanished is passed over in silence; one that is there and does not
    read is warned about as before."""
    store = Store(tmp_path / "results")
    store.ensure_writable()
    attempt = store.start_attempt("aaaa")
    attempt.write_step(report(0, 3.0))
    part = next((tmp_path / "results" / "running").iterdir())
    part.write_bytes(part.read_bytes()[:40])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_tables(tmp_path / "results", include_running=True)
    assert any("1 unreadable parts skipped" in str(w.message) for w in caught)
