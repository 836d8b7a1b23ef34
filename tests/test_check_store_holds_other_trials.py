"""`mutransfer check` re-run on an OUT whose transfer store (OUT/sweep) holds more than this
check's cells: the seeds of a later round of an earlier run, or the widths, LRs or trial config
of an earlier version of the check file. A round's drift, and its trial count, are of the
round's own cells (its widths, LRs and seeds under this file's config), never of whatever else
the store holds."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

from mutransfer.commands.check_plan import Budget
from mutransfer.commands.check_spec import CheckSpec
from mutransfer.results.store import Tables
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

GRID = [2.0**e for e in range(-10, -3)]


def _spec(out) -> CheckSpec:
    return CheckSpec(name="c", model={"arch": "mamba", "n_layer": 1, "d_state": 4,
                                      "base_width": 32},
                     param={"name": "mup"}, train={"steps": 20},
                     check={"widths": [32, 64], "seeds": [0, 1], "budget": {"seeds": 2},
                            "lr": {"log2": [-10, -4], "per_octave": 1}},
                     storage=str(out))


def _as_the_checks_cells(tables: Tables, spec: CheckSpec, storage: str) -> Tables:
    """The synthetic trials given the trial ids of the check's own cells (width, LR, seed)."""
    from mutransfer.sweep.run.driver import prepare

    cells = prepare(spec.sweep(), storage, check_data=False).cells
    ids = {(c.width, float(c.config["train"]["lr"]), int(c.config["train"]["seed"])):
           c.trial_id for c in cells}
    new = {r.trial_id: ids[(int(r.width), float(r.lr), int(r.seed))]
           for r in tables.trials.itertuples()}
    trials = tables.trials.assign(trial_id=tables.trials["trial_id"].map(new))
    steps = tables.steps.assign(trial_id=tables.steps["trial_id"].map(new))
    return Tables(trials, steps)


def test_a_rounds_drift_and_trials_are_of_its_own_cells_not_the_rest_of_the_store(
        tmp_path, monkeypatch):
    import mutransfer.analysis as analysis
    import mutransfer.commands.check as check
    from mutransfer.sweep.run import driver

    spec = _spec(tmp_path)
    storage = str(tmp_path / "sweep")
    # this check's cells: lr* 2^-7 at both widths, i.e. no drift at all
    own = _as_the_checks_cells(
        synthetic_tables([Planted("mup", 2**-7, 0.0)], [32, 64], GRID, [0, 1], noise=0.002),
        spec, storage)
    # left by an earlier version of the file: width 16 (lr* 2^-4) and seeds 2-3 whose lr*
    # halves per doubling; read with the check's own, they make a drift of about -1.5
    older = synthetic_tables([Planted("mup", 2**-4, -1.0)], [16, 32, 64], GRID, [2, 3],
                             noise=0.002, rng_seed=1)
    wide = synthetic_tables([Planted("mup", 2**-4, 0.0)], [16], GRID, [0, 1], noise=0.002,
                            rng_seed=2)
    stored = Tables(pd.concat([own.trials, older.trials, wide.trials], ignore_index=True),
                    pd.concat([own.steps, older.steps, wide.steps], ignore_index=True))
    write_results(storage, stored)
    # the search itself has nothing left to run: every one of its cells is stored
    monkeypatch.setattr(driver, "run", lambda *a, **k: SimpleNamespace(interrupted=False))
    monkeypatch.setattr(analysis, "make_plots", lambda *a, **k: [])

    r = check._transfer_stage(spec, tmp_path, 20, Budget(), None, time.time(), 0)

    assert r.rounds == 1 and r.seeds == [0, 1] and not r.drift.get("note")
    assert abs(r.drift["slope"]) < 0.05, r.drift  # not the -1.5 of the whole store
    assert r.drift["widths"] == "32,64"  # the check's widths, not width 16 as well
    assert r.trials == len(own.trials)  # 28 cells of its own, not the 84 stored
    assert r.trial_seconds == np.float64(own.trials["wall_time_s"].sum())
