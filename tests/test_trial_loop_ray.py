"""The trial loop inside a real sweep on a real local Ray: a worker killed mid-trial is retried
and resumes from its checkpoint (with the losses of an uninterrupted run), and a diverged trial
is stored with empty final/best losses while the sweep finishes."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mutransfer.results.store import read_tables
from mutransfer.sweep.plan.cells import load_plan
from mutransfer.sweep.run.trainable import TrialUnit, run_unit
from tests.sweeps import assert_every_cell_once, write_sweep

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[1]
HOOKS = Path(__file__).resolve().parent / "faulthooks"  # sitecustomize: kill after a save


def test_a_worker_killed_mid_trial_is_retried_and_resumes_from_its_checkpoint(tmp_path):
    steps = 40
    path = write_sweep(tmp_path, "resume", {"width": [16], "lr": [0.01]}, steps=steps)
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {**os.environ, "RESUME_MARKS": str(marks),
           "PYTHONPATH": os.pathsep.join([str(HOOKS), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                           "--no-analysis", "--num-cpus", "2"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "retrying" in out and "0 failed" in out, out
    killed_at = int((marks / "killed").read_text())
    assert killed_at > 0 and (marks / f"resumed-{killed_at}").exists(), sorted(os.listdir(marks))
    assert_every_cell_once(path, steps)
    results = tmp_path / "resume"
    assert not list((results / "checkpoints").glob("*"))

    cell = load_plan(path).cells[0]
    straight = tmp_path / "straight"
    run_unit(TrialUnit(cell.config, cell.columns, cell.trial_id), str(straight), "resume")
    cols = ["step", "train_loss", "eval_loss", "grad_norm", "lr"]
    assert read_tables(results).steps[cols].equals(read_tables(straight).steps[cols])


def test_a_diverged_trial_is_stored_with_empty_final_losses_and_the_sweep_finishes(
        diverging_sweep):
    path, rc, out = diverging_sweep  # a real sweep on the shared local Ray (tests/conftest.py)
    assert rc == 0, out
    assert "1 complete, 1 diverged, 0 failed" in out
    trials = read_tables(path.parent / "div").trials.set_index("lr")
    diverged, trained = trials.loc[1000.0], trials.loc[0.001]
    assert diverged["status"] == "diverged"
    assert math.isnan(diverged["final_eval_loss"]) and math.isnan(diverged["best_eval_loss"])
    assert math.isfinite(diverged["last_finite_loss"])
    assert trained["last_finite_loss"] == trained["final_eval_loss"]
