"""A real two-node Ray cluster on 127.0.0.1 (tests/raycluster.py): a sweep submitted with
`mutransfer submit` and followed with `mutransfer status` and `mutransfer logs` runs on both
nodes and stores every cell; a worker node stopped mid-sweep hands its trials to the other node.

Both nodes are on this machine, so the `host` column tells them apart by the Ray node id it
carries (`hostname/NODEID8`). Needs Ray's dashboard and Jobs API (`ray[default]`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mutransfer.cli import main
from tests.gate import Gate
from tests.raycluster import Cluster, start_cluster
from tests.sweeps import assert_every_cell_once, trial_ids, write_sweep

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(importlib.util.find_spec("aiohttp") is None,
                       reason="needs ray[default] (the Jobs API client and dashboard)"),
]

REPO = Path(__file__).resolve().parents[1]
AXES = {"width": [16, 32], "lr": [0.001, 0.003, 0.01]}
ONE_CPU = {"cpus_per_trial": 1}


@pytest.fixture(scope="module")
def gate(tmp_path_factory) -> Gate:
    """Open unless a test holds it (tests/gate.py); the cluster's trials pass through it."""
    return Gate(tmp_path_factory.mktemp("gate"))


@pytest.fixture(scope="module")
def cluster(gate: Gate):
    """Head (1 CPU) and one worker node (1 CPU, resource `worker`); stopped at the end."""
    c = start_cluster(node_env=gate.env)
    try:
        c.start_head(num_cpus=1)
        c.add_worker(num_cpus=1)
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster_env(cluster: Cluster, monkeypatch):
    for key, value in cluster.env.items():  # the cluster's token, for submit/status/drivers
        monkeypatch.setenv(key, value)
    return cluster


def test_a_submitted_sweep_runs_on_both_nodes_and_stores_every_cell(
        tmp_path, cluster_env, gate, capsys, monkeypatch):
    project, storage = tmp_path / "project", tmp_path / "results"
    project.mkdir()
    path = write_sweep(project, "cluster", AXES, storage, steps=20, resources=ONE_CPU)
    monkeypatch.chdir(project)

    gate.hold()  # on a busy machine one node could finish every trial before the other starts one
    try:
        assert main(["submit", path.name, "--dashboard", cluster_env.dashboard, "--job-id",
                     "mt-cluster-1", "--no-analysis"]) == 0
        assert capsys.readouterr().out.splitlines()[0] == "mt-cluster-1"
        wait_for_two_held_trials(storage, gate)
    finally:
        gate.open()
    assert main(["status", "mt-cluster-1", "--dashboard", cluster_env.dashboard, "--wait"]) == 0, \
        main(["logs", "mt-cluster-1", "--dashboard", cluster_env.dashboard])
    assert "SUCCEEDED" in capsys.readouterr().out
    assert main(["logs", "mt-cluster-1", "--dashboard", cluster_env.dashboard]) == 0
    logs = capsys.readouterr().out
    assert "ran 6 trials" in logs and "6 complete" in logs, logs
    assert main(["status", "no-such-job", "--dashboard", cluster_env.dashboard]) == 2
    assert "no job no-such-job" in capsys.readouterr().err

    tables = assert_every_cell_once(path, 20, parts=False)
    assert len(tables.trials) == 6
    hosts = set(tables.trials["host"])
    assert len(hosts) == 2, hosts  # one Ray node id per node: trials ran on both
    assert len({h.split("/")[0] for h in hosts}) == 1  # ... of one machine


def test_a_submitted_sweep_is_listed_then_stopped_and_submitted_again_resumes(
        tmp_path, cluster_env, gate, capsys, monkeypatch):
    """`mutransfer jobs` lists the sweeps submitted (not the storage checks), `mutransfer stop`
    stops one mid-trial (its driver lets the store go), and the file submitted again runs to
    the end into the same store."""
    project, storage, dashboard = tmp_path / "project", tmp_path / "results", \
        cluster_env.dashboard
    project.mkdir()
    path = write_sweep(project, "stopped", {"width": [16], "lr": [0.001, 0.003]}, storage,
                       steps=10, resources=ONE_CPU)
    monkeypatch.chdir(project)
    gate.hold()
    try:
        assert main(["submit", path.name, "--dashboard", dashboard, "--job-id", "mt-stop-1",
                     "--no-analysis"]) == 0
        wait_for_two_held_trials(storage, gate)
        capsys.readouterr()
        assert main(["jobs", "--dashboard", dashboard]) == 0
        listing = capsys.readouterr().out.splitlines()
        assert listing[0].split()[:3] == ["job", "id", "status"]
        row = next(line.split() for line in listing if line.split()[0] == "mt-stop-1")
        assert row[1:3] == ["RUNNING", "stopped"], listing
        assert main(["stop", "mt-stop-1", "--dashboard", dashboard, "--wait"]) == 0
        assert "mt-stop-1: STOPPED" in capsys.readouterr().out
    finally:
        gate.open()
    assert main(["stop", "mt-stop-1", "--dashboard", dashboard]) == 0
    assert "(it had ended)" in capsys.readouterr().out
    assert main(["submit", path.name, "--dashboard", dashboard, "--job-id", "mt-stop-2",
                 "--no-analysis"]) == 0
    assert main(["status", "mt-stop-2", "--dashboard", dashboard, "--wait"]) == 0, \
        main(["logs", "mt-stop-2", "--dashboard", dashboard])
    assert len(assert_every_cell_once(path, 10, parts=False).trials) == 2
    assert main(["stop", "no-such-job", "--dashboard", dashboard]) == 2
    assert "no job no-such-job" in capsys.readouterr().err


def test_the_missions_submit_line_works_with_the_sweep_files_own_relative_storage(
        tmp_path, cluster_env, capsys, monkeypatch):
    """`mutransfer submit FILE --address http://HEAD:8265`, the file storing to a relative
    results/NAME: the head sees this machine's folder (one machine here), so the job writes
    there, and `mutransfer analyze results/NAME` here reads it."""
    project = tmp_path / "project"
    project.mkdir()
    path = write_sweep(project, "relative", {"width": [16], "lr": [0.003, 0.01]},
                       Path("results/relative"), steps=10, resources=ONE_CPU)
    monkeypatch.chdir(project)
    assert main(["submit", path.name, "--address", cluster_env.dashboard, "--job-id",
                 "mt-cluster-rel", "--no-analysis"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[0] == "mt-cluster-rel"
    assert f"storage: {project / 'results' / 'relative'}" in out.err
    assert main(["status", "mt-cluster-rel", "--dashboard", cluster_env.dashboard,
                 "--wait"]) == 0, main(["logs", "mt-cluster-rel", "--dashboard",
                                        cluster_env.dashboard])
    assert "SUCCEEDED" in capsys.readouterr().out
    assert len(assert_every_cell_once(path, 10, parts=False).trials) == 2
    assert main(["analyze", "results/relative"]) == 0
    assert not list(project.rglob(".mutransfer-shared-*"))  # the check's marker is gone


def test_a_worker_node_stopped_mid_sweep_hands_its_trials_to_the_other_node(
        tmp_path, cluster_env, gate):
    steps = 20
    storage, log = tmp_path / "results", tmp_path / "driver.log"
    path = write_sweep(tmp_path, "nodeloss", AXES, storage, steps=steps, resources=ONE_CPU)
    worker = next(n for n in cluster_env.nodes if n.name == "worker")
    worker_id = cluster_env.node_id("worker")[:8]
    gate.hold()  # each trial waits mid-trial, its first step rows stored, until the stop
    driver = subprocess.Popen([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                               "--address", cluster_env.gcs, "--no-analysis"], cwd=REPO,
                              stdout=log.open("wb"), stderr=subprocess.STDOUT,
                              start_new_session=True, env=dict(os.environ))
    try:
        wait_for_two_held_trials(
            storage, gate, lambda: None if driver.poll() is None else log.read_text())
        worker.stop()
        # the trial processes of the worker died with it: nothing it ran can finish after this
        finished_on_worker_before = trial_ids(storage / "trials")
        gate.open()
        assert driver.wait(timeout=500) == 0, log.read_text()
    finally:
        gate.open()
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    out = log.read_text()
    assert "retrying" in out, out  # the trial the worker was running failed and ran again

    tables = assert_every_cell_once(path, steps, parts=False)
    on_worker = tables.trials[tables.trials["host"].str.endswith("/" + worker_id)]
    assert set(on_worker["trial_id"]) <= finished_on_worker_before
    after = tables.trials[~tables.trials["trial_id"].isin(finished_on_worker_before)]
    assert len(after) >= 4  # six cells, at most two finished before the stop
    assert after["host"].nunique() == 1 and not after["host"].iloc[0].endswith(worker_id)


def wait_for_two_held_trials(storage: Path, gate: Gate, ended=lambda: None,
                             timeout_s: float = 300) -> None:
    """Until two trials wait at the gate at once: one CPU per node and per trial, so one on
    each node. `ended`: None while the sweep runs, then what it printed."""
    deadline = time.monotonic() + timeout_s
    while len(running_trials(storage) & gate.held()) < 2:
        assert (out := ended()) is None, out
        assert time.monotonic() < deadline, "two trials never ran at once"
        time.sleep(0.2)


def running_trials(storage: Path) -> set[str]:
    """Trials with step rows of a running attempt and no trial row yet."""
    return trial_ids(storage / "running") - trial_ids(storage / "trials")


def test_a_driver_here_reaches_a_token_cluster_with_only_its_token_set(
        tmp_path, cluster: Cluster, monkeypatch, capsys):
    """As `submit` does: a local token (RAY_AUTH_TOKEN) switches the client to token
    authentication, without RAY_AUTH_MODE=token being set as well."""
    monkeypatch.setenv("RAY_AUTH_TOKEN", cluster.token)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    path = write_sweep(tmp_path, "direct", {"width": [16], "lr": [0.003, 0.01]},
                       tmp_path / "results", steps=10, resources=ONE_CPU)
    assert main(["sweep", str(path), "--address", cluster.gcs, "--no-analysis"]) == 0, \
        capsys.readouterr()
    assert "ran 2 trials" in capsys.readouterr().out


def test_a_driver_here_refuses_a_trial_no_node_of_the_cluster_could_hold(
        tmp_path, cluster_env: Cluster, capsys):
    """This machine's memory is not the cluster's: a run with --address is held to the
    largest node's (Ray's memory and object store there), in one line, before any trial,
    and the results folder it would have created is not left behind. Before, the trial
    started and failed on a node as it built its model."""
    deep = {"n_layer": 10**8, "d_state": 4, "base_width": 16}  # terabytes of weights
    path = write_sweep(tmp_path, "deep", {"width": [16], "lr": [0.01]}, tmp_path / "results",
                       steps=2, resources=ONE_CPU, model=deep)
    rc = main(["sweep", str(path), "--address", cluster_env.gcs, "--no-analysis"])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "width 16, n_layer 100000000: the model does not fit in memory" in err
    # 1 or 2 nodes: another test of this module's cluster stops its worker
    assert re.search(r"the largest of the cluster's [12] node\(s\) has \d+ GB", err), err
    assert not (tmp_path / "results").exists()
