"""`analyze` and `plot` on stores holding losses no training run can have as a result: a trial
stored as trained with a final loss of 1e300, float32's largest (3e38) or inf, and step rows
of such losses.

The divergence rule (mutransfer/divergence.py) calls a trial whose final eval loss is not
finite or above initial loss + train.diverge_delta diverged, so the trainer never stores one as
trained; a table edited by hand or written by another program may. The analysis judges such a
row by the rule: it counts as diverged, as the trainer would have stored it, with a note. No
loss reaches a fit it would overflow (before: numpy's overflow RuntimeWarnings, and a NaN
interval for lr* where a 1e300 'trained' loss sat in the fit)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, make_plots, write_analysis
from mutransfer.cli import main
from tests.sweeps import LR_GRID, MUP, SP
from tests.synthetic_sweeps import STEPS, synthetic_tables, write_results

HUGE = [1e300, 1e160, float(np.float32(3e38)), np.inf]
NOTE = "trials stored as trained counted as diverged"
# what the trainer stores of the rule each trial ran under (the rest of its config left out)
CONFIG = {"train": {"diverge_delta": 1.0}}


def _tables(config: dict | None = CONFIG):
    t = synthetic_tables([SP, MUP], [64, 128], LR_GRID, [0, 1])
    t.trials["config"] = json.dumps(config if config is not None else {})
    return t


def _row(trials: pd.DataFrame) -> int:
    """The index of the trial edited: sp, width 64, the smallest LR, seed 0 (it trained)."""
    hit = ((trials.parameterization == "sp") & (trials.width == 64)
           & np.isclose(trials.lr, min(LR_GRID)) & (trials.seed == 0))
    (i,) = trials.index[hit]
    assert trials.loc[i, "status"] == "complete"
    return int(i)


def _stored_as_trained(tmp_path, loss: float, config: dict | None = CONFIG,
                       name: str = "s"):
    """A store whose one trial is 'complete' with final (and best) loss `loss`, its last
    step rows at that loss too; every trial's stored config is `config` (None: none)."""
    t = _tables(config)
    i = _row(t.trials)
    t.trials.loc[i, ["final_eval_loss", "best_eval_loss"]] = loss
    late = (t.steps.trial_id == t.trials.loc[i, "trial_id"]) & (t.steps.step > STEPS // 2)
    t.steps.loc[late, ["eval_loss", "train_loss"]] = loss
    return write_results(tmp_path / name, t)


def _stored_as_diverged(tmp_path):
    """The same store as the trainer writes it when that trial diverges at its last eval."""
    t = _tables()
    i = _row(t.trials)
    t.trials.loc[i, ["status", "diverged", "diverge_step"]] = ["diverged", True, STEPS]
    t.trials.loc[i, ["final_eval_loss", "best_eval_loss"]] = np.nan
    return write_results(tmp_path / "diverged", t)


def _analyze_strictly(root):
    """analyze, write the tables, draw the plots: a RuntimeWarning is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        a = analyze(root)
        write_analysis(a, root / "analysis")
        make_plots(root, a)
    return a


@pytest.fixture(scope="module")
def as_diverged(tmp_path_factory):
    return analyze(_stored_as_diverged(tmp_path_factory.mktemp("as_diverged")))


@pytest.mark.parametrize("loss", HUGE, ids=["1e300", "1e160", "float32 max", "inf"])
def test_a_trained_row_with_a_loss_beyond_the_bound_reads_as_diverged(tmp_path, as_diverged,
                                                                      loss):
    a = _analyze_strictly(_stored_as_trained(tmp_path, loss))
    cell = a.cells[(a.cells.parameterization == "sp") & (a.cells.width == 64)].set_index("lr")
    first = cell.loc[min(LR_GRID)]
    assert first.status == "partial" and first.n_diverged == 1 and first.n_trained == 1
    for name in ("cells", "lr_opt", "stability"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(as_diverged, name))
    assert np.isfinite(a.lr_opt[["lr_opt", "ci_low", "ci_high"]].to_numpy()).all()
    assert any(n.startswith(f"1 {NOTE}") for n in a.notes), a.notes


def _first_cell(a) -> str:
    """The status of the edited trial's cell (sp, width 64, the smallest LR)."""
    cell = a.cells[(a.cells.parameterization == "sp") & (a.cells.width == 64)].set_index("lr")
    return str(cell.loc[min(LR_GRID)].status)


def test_the_bound_is_the_trials_own_diverge_delta(tmp_path):
    """A trial that ended 100 nats above its initial loss: diverged under delta 1, trained
    under the delta 1e6 it may have run with."""
    assert _first_cell(analyze(_stored_as_trained(tmp_path, 105.5))) == "partial"
    wide = analyze(_stored_as_trained(tmp_path, 105.5, {"train": {"diverge_delta": 1e6}},
                                      name="wide"))
    assert _first_cell(wide) == "trained" and not any(NOTE in n for n in wide.notes)


def test_a_row_that_does_not_record_its_bound_is_judged_by_a_non_finite_loss_only(tmp_path):
    """No stored config, no delta: the analysis does not guess the bound the trial ran
    under; an inf loss is diverged under every bound."""
    assert _first_cell(analyze(_stored_as_trained(tmp_path, 105.5, None))) == "trained"
    assert _first_cell(analyze(_stored_as_trained(tmp_path, np.inf, None, "inf"))) == "partial"


def test_a_row_without_an_initial_loss_is_judged_by_a_non_finite_loss_only(tmp_path):
    t = _tables()
    i = _row(t.trials)
    t.trials["initial_loss"] = np.nan
    t.trials.loc[i, ["final_eval_loss", "best_eval_loss"]] = 105.5
    assert _first_cell(analyze(write_results(tmp_path / "a", t))) == "trained"
    t.trials.loc[i, ["final_eval_loss", "best_eval_loss"]] = np.inf
    assert _first_cell(analyze(write_results(tmp_path / "b", t))) == "partial"


def test_a_store_of_trainer_rows_is_judged_as_stored(tmp_path):
    """Every row as the trainer stores it: the rule changes none (no note)."""
    a = analyze(write_results(tmp_path / "s", _tables()))
    assert not any(NOTE in n for n in a.notes)


@pytest.mark.parametrize("command", ["analyze", "plot"])
def test_the_commands_print_no_overflow_warning(tmp_path, capsys, command):
    root = _stored_as_trained(tmp_path, 1e300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rc = main([command, str(root)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "overflow" not in err and "Traceback" not in err
