"""A real two-node Ray cluster on 127.0.0.1 (tests/raycluster.py): a sweep submitted with
`mutransfer submit` and followed with `mutransfer status` runs on both nodes and stores every
cell; a worker node stopped mid-sweep hands its trials to the other node.

Both nodes are on this machine, so the `host` column tells them apart by the Ray node id it
carries (`hostname/NODEID8`). Needs Ray's dashboard and Jobs API (`ray[default]`).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.results.store import read_tables
from mutransfer.sweep.grid import load_plan
from tests.raycluster import Cluster, start_cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("aiohttp") is None,
                       reason="needs ray[default] (the Jobs API client and dashboard)"),
]

REPO = Path(__file__).resolve().parents[1]
EVAL_EVERY = 5


@pytest.fixture(scope="module")
def cluster():
    """Head (1 CPU) and one worker node (1 CPU, resource `worker`); stopped at the end."""
    c = start_cluster()
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


def write_sweep(folder: Path, name: str, steps: int, storage: Path,
                eval_every: int = EVAL_EVERY) -> Path:
    doc = {"name": name, "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
           "train": {"steps": steps, "batch_size": 2, "seq_len": 16, "eval_every": eval_every,
                     "eval_batches": 1},
           "axes": {"width": [16, 32], "lr": [0.001, 0.003, 0.01]},
           "resources": {"cpus_per_trial": 1}, "storage": str(storage)}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def assert_every_cell_once(path: Path, storage: Path, steps: int, every: int = EVAL_EVERY):
    tables = read_tables(storage)
    cells = sorted(c.trial_id for c in load_plan(path).cells)
    assert sorted(tables.trials["trial_id"]) == cells
    assert (tables.trials["status"] == "complete").all()
    assert not tables.steps.duplicated(["trial_id", "step"]).any()
    assert len(tables.steps) == len(cells) * (steps // every + 1)
    return tables


def test_a_submitted_sweep_runs_on_both_nodes_and_stores_every_cell(
        tmp_path, cluster_env, capsys, monkeypatch):
    project, storage = tmp_path / "project", tmp_path / "results"
    project.mkdir()
    path = write_sweep(project, "cluster", 20, storage)
    monkeypatch.chdir(project)

    assert main(["submit", path.name, "--address", cluster_env.dashboard, "--job-id",
                 "mt-cluster-1", "--no-analysis"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "mt-cluster-1"
    assert main(["status", "mt-cluster-1", "--address", cluster_env.dashboard, "--wait"]) == 0, \
        main(["logs", "mt-cluster-1", "--address", cluster_env.dashboard])
    assert "SUCCEEDED" in capsys.readouterr().out

    tables = assert_every_cell_once(path, storage, 20)
    hosts = set(tables.trials["host"])
    assert len(hosts) == 2, hosts  # one Ray node id per node: trials ran on both
    assert len({h.split("/")[0] for h in hosts}) == 1  # ... of one machine


def test_a_worker_node_stopped_mid_sweep_hands_its_trials_to_the_other_node(
        tmp_path, cluster_env):
    # long trials (tens of seconds here) with few evals: the stop lands inside a trial
    steps, every = 3000, 500
    storage, log = tmp_path / "results", tmp_path / "driver.log"
    path = write_sweep(tmp_path, "nodeloss", steps, storage, eval_every=every)
    worker = next(n for n in cluster_env.nodes if n.name == "worker")
    worker_id = cluster_env.node_id("worker")[:8]
    driver = subprocess.Popen([sys.executable, "-m", "mutransfer.cli", "sweep", str(path),
                               "--address", cluster_env.gcs, "--no-analysis"], cwd=REPO,
                              stdout=log.open("wb"), stderr=subprocess.STDOUT,
                              start_new_session=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 300
        # one CPU per node and per trial: two trials running at once means one on each node
        while len(running_trials(storage)) < 2:
            assert driver.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "two trials never ran at once"
            time.sleep(0.2)
        worker.stop()
        # the trial processes of the worker died with it: nothing it ran can finish after this
        finished_on_worker_before = trial_ids(storage / "trials")
        assert driver.wait(timeout=500) == 0, log.read_text()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    out = log.read_text()
    assert "retrying" in out, out  # the trial the worker was running failed and ran again

    tables = assert_every_cell_once(path, storage, steps, every)
    on_worker = tables.trials[tables.trials["host"].str.endswith("/" + worker_id)]
    assert set(on_worker["trial_id"]) <= finished_on_worker_before
    after = tables.trials[~tables.trials["trial_id"].isin(finished_on_worker_before)]
    assert len(after) >= 4  # six cells, at most two finished before the stop
    assert after["host"].nunique() == 1 and not after["host"].iloc[0].endswith(worker_id)


def trial_ids(folder: Path) -> set[str]:
    return {p.name[5:21] for p in folder.glob("part-*.parquet")}


def running_trials(storage: Path) -> set[str]:
    """Trials with step rows but no trial row yet."""
    return trial_ids(storage / "steps") - trial_ids(storage / "trials")
