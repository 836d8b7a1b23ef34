"""`mutransfer submit / status / logs` against a real single-node Ray cluster with a dashboard.

Needs Ray's HTTP client and dashboard (`pip install 'ray[default]'`); skipped without them.
The cluster is started here (`ray start --head` in its own session, private temp dir) and
stopped by killing that session, also when the test fails.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.results.store import read_tables
from tests.raycluster import free_port, wait_for_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("aiohttp") is None,
                       reason="needs ray[default] (the Jobs API client and dashboard)"),
]


@pytest.fixture
def ray_head(tmp_path):
    gcs, dash = free_port(), free_port()
    temp = Path("/tmp") / f"mt-ray-{os.getpid()}"  # short: Ray's socket paths have a limit
    proc = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--port", str(gcs),
         "--dashboard-port", str(dash), "--dashboard-host", "127.0.0.1", "--num-cpus", "2",
         "--include-dashboard", "true", "--temp-dir", str(temp), "--disable-usage-stats"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=180)
        wait_for_port(dash, 120)
        yield f"http://127.0.0.1:{dash}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(temp, ignore_errors=True)


def test_submit_then_follow_status_and_logs(tmp_path, ray_head, capsys, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    storage = tmp_path / "results"
    doc = {"name": "job", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
           "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5,
                     "eval_batches": 1},
           "axes": {"width": [16, 32], "lr": [0.001, 0.01]}, "storage": str(storage)}
    (project / "sweep.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.chdir(project)

    assert main(["submit", "sweep.yaml", "--address", ray_head, "--job-id", "mt-job-1",
                 "--no-analysis"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "mt-job-1"
    assert main(["status", "mt-job-1", "--address", ray_head, "--wait"]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out
    assert main(["logs", "mt-job-1", "--address", ray_head]) == 0
    logs = capsys.readouterr().out
    assert "ran 4 trials" in logs and "4 complete" in logs
    assert len(read_tables(storage).trials) == 4
    assert main(["status", "no-such-job", "--address", ray_head]) == 2
    assert "no job no-such-job" in capsys.readouterr().err
