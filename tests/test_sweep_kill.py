"""The sweep driver is killed (SIGKILL) while trials run; run again, every cell is complete
exactly once with all its steps. Real processes, a real local Ray, the real trainer."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mutransfer.results.store import read_tables
from mutransfer.sweep.driver import SweepArgs, run_sweep
from mutransfer.sweep.grid import load_plan

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
STEPS, EVAL_EVERY = 40, 5


def write_sweep(tmp_path: Path) -> Path:
    doc = {"name": "kill",
           "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
           "train": {"steps": STEPS, "batch_size": 2, "seq_len": 16, "eval_every": EVAL_EVERY,
                     "eval_batches": 1},
           "axes": {"width": [16, 32], "lr": [0.001, 0.003, 0.01]},
           "storage": str(tmp_path / "results")}
    path = tmp_path / "kill.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def ids_in(folder: Path) -> set[str]:
    return {p.name.split("-")[1].split(".")[0] for p in folder.glob("part-*.parquet")}


def wait_for_trials_mid_run(results: Path, proc: subprocess.Popen, timeout_s: float) -> set[str]:
    """Until one trial has finished and another has written steps but not finished."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the sweep ended before it could be killed"
        done = ids_in(results / "trials")
        running = ids_in(results / "steps") - done
        if done and running:
            return running
        time.sleep(0.2)
    raise AssertionError("no trial was running within the time limit")


def test_a_killed_sweep_resumes_and_stores_every_cell_exactly_once(tmp_path):
    path = write_sweep(tmp_path)
    results = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                             "--no-analysis"], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        mid_run = wait_for_trials_mid_run(results, proc, timeout_s=240)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        try:  # Ray processes the killed driver started (its session) must not outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert mid_run - ids_in(results / "trials"), "a trial was mid-run when the driver died"

    out = io.StringIO()
    assert run_sweep(SweepArgs(str(path), analysis=False, out=out)) == 0, out.getvalue()
    assert "0 failed" in out.getvalue()

    tables = read_tables(results)
    cells = {c.trial_id for c in load_plan(path).cells}
    assert sorted(tables.trials["trial_id"]) == sorted(cells)  # every cell, each once
    assert (tables.trials["status"] == "complete").all()
    expected = list(range(0, STEPS + 1, EVAL_EVERY))
    for tid, steps in tables.steps.groupby("trial_id"):
        assert steps["step"].tolist() == expected, tid
    assert set(tables.steps["trial_id"]) == cells
    # on disk: one trial part and one (compacted) steps part per cell, nothing left over
    assert len(list((results / "trials").iterdir())) == len(cells)
    assert sorted(ids_in(results / "steps")) == sorted(cells)
    assert len(list((results / "steps").glob("*.parquet"))) == len(cells)
