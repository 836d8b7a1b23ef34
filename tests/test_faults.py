"""Faults during a sweep, with real processes, a real local Ray and the real trainer: after
each one (and a re-run where the fault stops the sweep) every cell is stored exactly once,
with each of its steps once.

Faults: a trial's worker process is SIGKILLed; the driver is SIGKILLed three times at random
moments (seeded); Parquet parts are truncated as by a crash mid-write; the results folder is
read-only or the disk fills up (a small tmpfs, mounted here: skipped where mounting is not
permitted; tests/test_bad_input.py covers a storage path under a regular file everywhere).
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mutransfer.commands.sweep import SweepArgs, run_sweep
from mutransfer.results.lease import LEASE_ENV
from mutransfer.results.store import Store, read_tables
from tests.gate import Gate
from tests.raycluster import with_env
from tests.sweeps import EVAL_EVERY, assert_every_cell_once, trial_ids, write_sweep

# a Ray group of its own (tests/conftest.py): under pytest-xdist it runs beside the "ray" group
pytestmark = [pytest.mark.slow, pytest.mark.ray(group="faults")]

REPO = Path(__file__).resolve().parents[1]


def sweep(path: Path) -> tuple[int, str]:
    """The sweep in this process, on the shared local Ray (`ray_local`)."""
    out = io.StringIO()
    return run_sweep(SweepArgs(str(path), analysis=False, out=out)), out.getvalue()


def start_driver(path: Path, log: Path, env: dict[str, str] | None = None
                 ) -> subprocess.Popen:
    """`mutransfer sweep` in its own session: the Ray it starts can be found and killed.
    `env`: more variables for it and the Ray it starts (e.g. a tests/gate.py gate's)."""
    return subprocess.Popen([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                             "--no-analysis", "--num-cpus", "2"], cwd=REPO,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True, env={**os.environ, **(env or {})})


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the driver and every process of its session (the local Ray it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def wait_until(condition, proc: subprocess.Popen, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended (rc {proc.returncode}) before {what}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# -- a trial's worker process dies ---------------------------------------------------------------

def test_a_killed_trial_worker_is_retried_and_the_trial_completes(tmp_path):
    steps = 10
    path = write_sweep(tmp_path, "worker", {"width": [16, 32], "lr": [0.001, 0.01]},
                       steps=steps)
    log, gate = tmp_path / "worker.log", Gate(tmp_path / "gate")
    gate.hold()  # trials wait mid-trial, their first step rows stored: the kill lands there
    proc = start_driver(path, log, gate.env)
    try:
        victims = wait_until(gate.held_pids, proc, 300, "a trial was running")
        os.kill(victims[0], signal.SIGKILL)
        gate.open()
        assert proc.wait(timeout=400) == 0, log.read_text()
    finally:
        gate.open()
        kill_session(proc)
    out = log.read_text()
    assert "retrying" in out and "0 failed" in out, out
    assert_every_cell_once(path, steps)


# -- the driver dies, again and again ------------------------------------------------------------

def test_a_driver_killed_three_times_at_random_moments_loses_and_duplicates_nothing(
        tmp_path, ray_local):
    steps = 200  # trials of a few seconds: the sweep must outlast three kills on a fast machine
    rng = random.Random(8)
    path = write_sweep(tmp_path, "driver", {"width": [16, 32], "lr": [0.001, 0.003, 0.01],
                                            "seed": [0, 1]}, steps=steps)
    results, log = tmp_path / "driver", tmp_path / "driver.log"
    killed_mid_trial = 0
    for _ in range(3):
        before = set(p.name for p in (results / "running").glob("*.parquet")) \
            if results.exists() else set()
        proc = start_driver(path, log)
        try:
            # the moment: a random time after this run's first steps row was written
            wait_until(lambda b=before: set(p.name for p in (results / "running")
                                            .glob("*.parquet")) - b, proc, 300,
                       "this run wrote a steps row")
            time.sleep(rng.uniform(0.0, 2.0))
            running = trial_ids(results / "running") - trial_ids(results / "trials")
            proc.send_signal(signal.SIGKILL)
        finally:
            kill_session(proc)
        # mid-trial: a trial running just before the kill is still unfinished after it
        killed_mid_trial += bool(running - trial_ids(results / "trials"))
    assert killed_mid_trial >= 1, "no kill landed while a trial was running"
    assert len(read_tables(results).trials) < 12, "the sweep finished before the last kill"

    rc, out = sweep(path)  # the rerun, in this process
    assert rc == 0, out
    assert "0 failed" in out
    tables = assert_every_cell_once(path, steps)
    # nothing left over in trials/: no temporary or set-aside file beside the parts
    assert len(list((results / "trials").iterdir())) == len(tables.trials)


# -- one driver per store ------------------------------------------------------------------------

def test_a_second_driver_is_refused_and_a_killed_drivers_ray_is_ended_by_the_next(tmp_path):
    """While a driver runs, a second `mutransfer sweep` on the same storage exits 2 with one
    line naming the first. The first is then SIGKILLed alone: its local Ray's agents and its
    trial workers (each in a process group of its own, here held mid-trial by a gate) outlive
    it. The next driver takes over its lease, ends what it left running, and finishes the
    sweep."""
    steps = 20
    path = write_sweep(tmp_path, "lease", {"width": [16, 32], "lr": [0.001, 0.01]}, steps=steps)
    results, log, gate = tmp_path / "lease", tmp_path / "lease.log", Gate(tmp_path / "gate")
    gate.hold()  # the first driver's trials stay mid-trial until the next driver ends them
    first = start_driver(path, log, gate.env)
    try:
        wait_until(gate.held, first, 300, "a trial was running")
        second = subprocess.run([sys.executable, "-m", "mutransfer.cli", "sweep", str(path)],
                                cwd=REPO, capture_output=True, text=True, timeout=600)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "in use by another sweep driver" in lines[0], lines
        assert f"pid {first.pid} " in lines[0]
        print(lines[0])
        token = json.loads((results / "driver.lease").read_text())["token"]
        os.kill(first.pid, signal.SIGKILL)  # the driver alone: its Ray stays behind
        first.wait(timeout=60)
        assert started_by(token), "nothing of the killed driver's Ray outlived it"
        third = subprocess.run([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                                "--no-analysis", "--num-cpus", "2"], cwd=REPO,
                               capture_output=True, text=True, timeout=600)
        assert third.returncode == 0, third.stdout + third.stderr
        # nothing the killed run started still runs (Ray's agents alone linger for a minute)
        assert started_by(token) == [], third.stdout
    finally:
        gate.open()
        kill_session(first)
    assert_every_cell_once(path, steps)


def started_by(token: str) -> list[int]:
    """Running processes that a driver holding the lease `token` started (they inherit it
    in their environment)."""
    return with_env(LEASE_ENV, token)


def test_an_interrupted_sweep_says_how_far_it_got_and_leaves_the_analysis(tmp_path, ray_local):
    """Ctrl-C, or SIGTERM (a batch system's time limit), which stops the run through the same
    handler: the sweep stops, says how many of its cells are done, releases its lease, and
    does not run the analysis (or rewrite plots) on a partial grid; exit 130. The next run
    finishes it. (SIGTERM before: Ray's C++ stack dump, an abort, exit 134.)"""
    steps = 100
    path = write_sweep(tmp_path, "stop", {"width": [16, 32], "lr": [0.001, 0.003, 0.01]},
                       steps=steps)
    results, log = tmp_path / "stop", tmp_path / "stop.log"
    proc = subprocess.Popen([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                             "--num-cpus", "2"], cwd=REPO, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: list((results / "trials").glob("*.parquet")), proc, 300,
                   "a trial finished")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130, log.read_text()
    finally:
        kill_session(proc)
    out = log.read_text()
    done = len(read_tables(results).trials)
    assert 1 <= done < 6, out
    assert f"interrupted: {done} of 6 done" in out, out
    assert "SIGTERM received" not in out and not (results / "driver.lease").exists(), out
    assert "ran " not in out and not (results / "analysis").exists(), out
    rc, out = sweep(path)  # the next run, in this process
    assert rc == 0, out
    assert_every_cell_once(path, steps)


# -- damaged parts, read-only and full storage (in this process, one local Ray) ------------------

def test_truncated_parts_are_set_aside_and_their_cells_run_again(tmp_path, ray_local):
    steps = 10
    path = write_sweep(tmp_path, "trunc", {"width": [16], "lr": [0.001, 0.003, 0.01]},
                       steps=steps)
    results = tmp_path / "trunc"
    rc, out = sweep(path)
    assert rc == 0, out
    ids = sorted(trial_ids(results / "trials"))
    trial_part = results / "trials" / f"part-{ids[0]}.parquet"
    steps_part = next((results / "steps").glob(f"part-{ids[1]}-*.parquet"))
    for part in (trial_part, steps_part):  # a crash mid-write where rename is not atomic
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])

    rc, out = sweep(path)
    assert rc == 0, out
    # the two damaged parts, the trial part whose steps were in the damaged steps part, and
    # the steps of the trial whose part was damaged: moved out of the table folders
    assert out.count("set aside a damaged part") == 4, out
    assert "3 cells, 1 stored, 2 to run" in out
    quarantine = results / "quarantine"
    assert (quarantine / "trials" / trial_part.name).exists()
    assert (quarantine / "steps" / steps_part.name).exists()
    assert (quarantine / "trials" / f"part-{ids[1]}.parquet").exists()
    assert_every_cell_once(path, steps)


def remount(mnt: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mnt)], check=True)


def test_a_read_only_results_folder_is_refused_before_any_trial(tmp_path, small_tmpfs, capsys):
    from mutransfer.cli import main

    remount(small_tmpfs, "ro")  # read-only for root too, unlike chmod
    path = write_sweep(tmp_path, "ro", {"lr": [0.001]}, small_tmpfs / "results", steps=10)
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not writable" in err and "Read-only" in err, err
    assert not (small_tmpfs / "results").exists()


def test_a_full_disk_fails_trials_with_the_reason_then_a_rerun_completes_them(
        tmp_path, small_tmpfs, ray_local):
    steps = 40
    results = small_tmpfs / "results"
    path = write_sweep(tmp_path, "full", {"width": [16, 32], "lr": [0.001, 0.01]}, results,
                       steps=steps, retries=0)
    rc, out = sweep(path)
    assert rc == 1, out
    assert "No space left on device" in out, out
    state = Store(results).scan(repair=False)  # what is stored is whole: no half trial counts
    assert len(state.complete) < 4
    stored_steps = read_tables(results).steps
    for tid in state.complete:
        assert (stored_steps["trial_id"] == tid).sum() == steps // EVAL_EVERY + 1

    remount(small_tmpfs, "size=16m")  # space freed: the same sweep finishes what is missing
    rc, out = sweep(path)
    assert rc == 0, out
    assert_every_cell_once(path, steps)
