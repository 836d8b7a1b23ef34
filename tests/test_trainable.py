"""A trial's row and what Tune and Optuna get back: a diverged trial has no final or best loss
(None in the row, null in the store, NaN in Tune's metrics) and its last finite loss; the
searcher scores it as its initial loss."""

from __future__ import annotations

import math

import pytest

from mutransfer.results.store import Store, read_tables
from mutransfer.sweep.run.trainable import TrialUnit, metrics_of, run_unit, trial_row
from mutransfer.sweep.search.objective import objective

DIVERGING = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
             "train": {"optimizer": "adam", "lr": 50.0, "steps": 12, "batch_size": 2,
                       "seq_len": 16, "eval_every": 3, "eval_batches": 1, "grad_clip": None}}


def payload(config: dict) -> TrialUnit:
    return TrialUnit.of(config, {"width": 16, "lr": config["train"]["lr"]})


def test_a_diverged_trial_is_stored_with_null_final_and_best_losses(tmp_path):
    metrics = run_unit(payload(DIVERGING), str(tmp_path), "s")
    assert metrics["status"] == "diverged" and math.isnan(metrics["final_eval_loss"])
    row = read_tables(tmp_path).trials.iloc[0]
    assert row["status"] == "diverged" and row["diverged"]
    assert math.isnan(row["final_eval_loss"]) and math.isnan(row["best_eval_loss"])
    assert math.isfinite(row["last_finite_loss"]) and row["diverge_step"] >= 1
    assert Store(tmp_path).is_complete(payload(DIVERGING).trial_id)  # done, not retried
    again = run_unit(payload(DIVERGING), str(tmp_path), "s")  # read back from the store
    assert again["skipped"] and again["objective"] == pytest.approx(row["initial_loss"])


def test_a_complete_trial_row_carries_its_final_loss_as_last_finite_loss(tmp_path):
    config = {**DIVERGING, "train": {**DIVERGING["train"], "lr": 0.003}}
    run_unit(payload(config), str(tmp_path), "s")
    row = read_tables(tmp_path).trials.iloc[0]
    assert row["status"] == "complete"
    assert row["last_finite_loss"] == row["final_eval_loss"] <= row["initial_loss"]


class Result:
    status, diverged, diverge_step = "diverged", True, 7
    final_eval_loss = best_eval_loss = None
    last_finite_loss, initial_loss = 6.25, 5.5
    max_excursion, steps_above_bound = 3.5, 4
    steps_done, tokens, wall_time_s, tokens_per_s = 6, 192, 1.0, 192.0


def test_the_row_of_a_diverged_result_has_none_for_final_and_best_loss():
    row = trial_row(TrialUnit({}, {"lr": 1.0}, "t"), Result(), "s")
    assert row["final_eval_loss"] is None and row["best_eval_loss"] is None
    assert row["last_finite_loss"] == 6.25 and row["diverge_step"] == 7
    assert row["max_excursion"] == 3.5 and row["steps_above_bound"] == 4


@pytest.mark.parametrize("missing", [None, math.nan])
def test_metrics_and_objective_of_a_diverged_row(missing):
    row = {"trial_id": "t", "status": "diverged", "diverged": True,
           "final_eval_loss": missing, "initial_loss": 5.5}
    metrics = metrics_of(row)
    assert math.isnan(metrics["final_eval_loss"])
    assert metrics["objective"] == objective(row) == 5.5


def test_a_trial_unit_survives_pickling_for_a_ray_worker():
    import pickle

    group = TrialUnit(dict(DIVERGING), {"width": 16}, "", "optuna", {"train.steps": "int64"})
    cell = group.at_lr(0.003)
    assert pickle.loads(pickle.dumps(cell)) == cell
    assert cell.trial_id == TrialUnit.of(cell.config, cell.columns).trial_id != ""
    assert cell.columns == {"width": 16, "lr": 0.003} and cell.search == "optuna"
    assert group.config["train"]["lr"] == 50.0  # the group's own config is left as it was
