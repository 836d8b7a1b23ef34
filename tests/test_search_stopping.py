"""The early-stopping rule (mutransfer/sweep/search/stopping.py) on small hand-made curves."""

from __future__ import annotations

import math

import numpy as np

from mutransfer.sweep.search.stopping import StopOptions, crossing_allowance, should_stop


def test_the_allowance_is_the_largest_gap_that_closed_by_the_end():
    # LR 2 leads at point 0 (short-horizon) and loses at the end: LR 0's gap shrank by 0.3
    y = np.array([[5.0, 4.0, 3.0],
                  [4.9, 3.95, 3.05],
                  [4.7, 3.9, 3.2]])
    a = crossing_allowance([y])
    assert np.allclose(a, [0.3, 0.1, 0.0])
    # a second curve with a larger shrink at point 1 raises that point only
    y2 = y.copy()
    y2[0, 1] = 4.4
    assert np.allclose(crossing_allowance([y, y2]), [0.3, 0.5, 0.0])
    assert np.isnan(crossing_allowance([y[:1]])).all()  # one LR informs nothing


def test_never_the_best_never_near_it_and_only_past_the_allowance():
    x = np.array([-10.0, -8.0, -6.0, -4.0])
    y = np.array([4.0, 3.5, 3.0, 3.2])
    opts = StopOptions(protect_octaves=2.5, safety=1.0)
    assert not should_stop(-6.0, 3.0, x, y, 0.1, opts)       # the best
    assert not should_stop(-4.0, 3.2, x, y, 0.1, opts)       # 2 octaves away: protected
    assert should_stop(-10.0, 4.0, x, y, 0.1, opts)          # 4 octaves, gap 1.0 > 0.1
    assert not should_stop(-10.0, 4.0, x, y, 1.5, opts)      # gap within the allowance
    assert not should_stop(-10.0, 4.0, x, y, np.nan, opts)   # nothing known: run on
    assert should_stop(-8.0, 3.5, x, y, 0.1, StopOptions(protect_octaves=1.5))
    assert not should_stop(-8.0, 3.5, x, y, 0.1, StopOptions(protect_octaves=2.5))


# -- live: a trial stopped from its own eval report, stored with status `stopped` ---------------

TRIAL = {"width": 16, "model": {"base_width": 16, "n_layer": 1, "d_state": 4},
         "train": {"optimizer": "adam", "lr": 2.0 ** -12, "steps": 12, "batch_size": 2,
                   "seq_len": 16, "eval_every": 3, "eval_batches": 1}}


def fake_trial(store, tid: str, losses: dict[int, float]) -> None:
    """A finished trial of id `tid` whose steps hold these eval losses."""
    attempt = store.start_attempt(tid)
    for step, loss in losses.items():
        attempt.write_step({"step": step, "eval_loss": loss, "tokens": 32 * step})
    attempt.finish({"status": "complete", "diverged": False, "final_eval_loss": loss,
                    "width": 32, "lr": 0.01, "seed": 0, "search": "grid"})


def test_a_trial_far_behind_the_best_lr_is_stopped_and_stored_as_stopped(tmp_path):
    from mutransfer.analysis.groups import prepare
    from mutransfer.results.store import Store, read_tables
    from mutransfer.sweep.run.trainable import TrialUnit, run_unit
    from mutransfer.sweep.search.stopping import StopContext

    store = Store(tmp_path)
    steps = [0, 3, 6, 9, 12]
    fake_trial(store, "peer", dict.fromkeys(steps, 0.5))       # the best LR, far ahead
    # the family's other width: two LRs whose gap never closes (allowance 0)
    fake_trial(store, "w32a", {k: 1.0 for k in steps})
    fake_trial(store, "w32b", {k: 1.2 for k in steps})
    ctx = StopContext(-12.0, 12, {"peer": -6.0},
                      {"w32a": (32, "0", -6.0), "w32b": (32, "0", -10.0)},
                      StopOptions(protect_octaves=1.0))
    unit = TrialUnit.of(TRIAL, {"width": 16, "lr": TRIAL["train"]["lr"], "seed": 0})
    unit = TrialUnit(unit.config, unit.columns, unit.trial_id, "grid", None, stop=ctx)
    metrics = run_unit(unit, str(tmp_path), "s")
    assert metrics["status"] == "stopped"
    row = read_tables(tmp_path).trials.set_index("trial_id").loc[unit.trial_id]
    assert row["status"] == "stopped" and row["steps_done"] == 3  # the first eval point
    assert math.isnan(row["final_eval_loss"]) and math.isfinite(row["last_finite_loss"])
    assert store.is_complete(unit.trial_id)  # a result: a re-run does not run it again
    # the analysis leaves it (and its LR at that width) out of lr*, and says so
    prep = prepare(read_tables(tmp_path).trials)
    assert prep.n_stopped == 1 and unit.trial_id not in set(prep.trials["trial_id"])


def test_a_protected_lr_runs_to_its_end(tmp_path):
    from mutransfer.results.store import Store, read_tables
    from mutransfer.sweep.run.trainable import TrialUnit, run_unit
    from mutransfer.sweep.search.stopping import StopContext

    store = Store(tmp_path)
    steps = [0, 3, 6, 9, 12]
    fake_trial(store, "peer", dict.fromkeys(steps, 0.5))
    fake_trial(store, "w32a", {k: 1.0 for k in steps})
    fake_trial(store, "w32b", {k: 1.2 for k in steps})
    ctx = StopContext(-12.0, 12, {"peer": -11.0},  # 1 octave from the best: protected
                      {"w32a": (32, "0", -6.0), "w32b": (32, "0", -10.0)},
                      StopOptions(protect_octaves=1.5))
    unit = TrialUnit.of(TRIAL, {"width": 16, "lr": TRIAL["train"]["lr"], "seed": 0})
    unit = TrialUnit(unit.config, unit.columns, unit.trial_id, "grid", None, stop=ctx)
    assert run_unit(unit, str(tmp_path), "s")["status"] == "complete"
    assert read_tables(tmp_path).trials.set_index("trial_id").loc[unit.trial_id,
                                                                  "steps_done"] == 12
