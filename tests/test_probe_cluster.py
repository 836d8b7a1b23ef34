"""The cluster path probed with valid but unusual input: dashboard addresses without a port or
in upper case, a bucket this machine cannot open, a file:// store, a cluster reached at
localhost, a log stream that breaks off, data the job's upload leaves out, and `doctor` for a
GPU sweep on a machine without one. No Ray cluster: Ray's Jobs API client is a fake."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
import ray.job_submission
import yaml

from mutransfer.cli import main
from mutransfer.errors import UserError
from mutransfer.results.fs import StorageUnreachable, not_a_folder
from mutransfer.sweep.run import jobs
from tests.sweeps import tiny_sweep
from tests.test_job_submit import fake_cluster


class Listening:
    """socket.create_connection that records where it was asked to connect (something
    listens everywhere)."""

    def __init__(self):
        self.asked: list[tuple[str, int]] = []

    def __call__(self, address, timeout=None):
        self.asked.append(address)
        return self

    def close(self) -> None:
        pass


class Dashboard:
    """Ray's JobSubmissionClient for a dashboard that takes every job."""

    urls: list[str] = []
    submitted: list[dict] = []

    def __init__(self, url: str):
        Dashboard.urls.append(url)

    def submit_job(self, **job):
        Dashboard.submitted.append(job)
        return "raysubmit_1"


@pytest.fixture
def dashboard(monkeypatch) -> Listening:
    listening = Listening()
    Dashboard.urls, Dashboard.submitted = [], []
    monkeypatch.setattr("socket.create_connection", listening)
    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", Dashboard)
    return listening


# -- where the dashboard is ---------------------------------------------------------------------

@pytest.mark.parametrize("given, probed, url", [
    ("head", ("head", 8265), "http://head:8265"),
    ("10.0.0.1/", ("10.0.0.1", 8265), "http://10.0.0.1:8265/"),
    ("http://head", ("head", 80), "http://head"),
    ("HTTP://head:8265", ("head", 8265), "http://head:8265"),
    ("https://head", ("head", 443), "https://head"),
])
def test_the_dashboard_is_probed_at_the_port_the_jobs_client_then_connects_to(
        dashboard, given, probed, url):
    """Before: `head` was probed at 8265 but Ray's client went to http://head (port 80), and
    `HTTP://head:8265` was probed at a host named `http`."""
    jobs.client(given)
    assert dashboard.asked == [probed]
    assert Dashboard.urls == [url]


def test_a_dashboard_url_without_a_port_that_nothing_answers_says_which_port_was_tried(
        monkeypatch):
    def refused(address, timeout=None):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr("socket.create_connection", refused)
    with pytest.raises(UserError, match=r"Connection refused; no port given, so 80, http's; "
                                        r"the dashboard's is 8265"):
        jobs.client("http://head")


def test_a_dashboard_of_another_scheme_is_refused_before_ray_imports_a_module_of_its_name(
        dashboard):
    with pytest.raises(UserError, match=r"ftp://head:8265: expected http://HOST:8265"):
        jobs.client("ftp://head:8265")
    assert Dashboard.urls == []


@pytest.mark.parametrize("value", ["http://head:6379", "HTTPS://head:10001/"])
def test_a_gcs_address_written_as_a_url_gets_the_hint_for_sweep(capsys, value):
    assert main(["status", "raysubmit_1", "--dashboard", value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mutransfer sweep --address" in err, err


# -- storage this machine cannot open, and file:// ----------------------------------------------

def _no_network(monkeypatch) -> None:
    """pyarrow opening an s3:// URI on a machine without the bucket's network: the region
    lookup fails with an OSError."""
    class FileSystem:
        @staticmethod
        def from_uri(uri):
            raise OSError("When resolving region for bucket 'bucket': AWS Error "
                          "NETWORK_CONNECTION during HeadBucket operation")

    class NoNetwork:  # pyarrow.fs, but for opening a URI (its types are immutable)
        def __getattr__(self, name):
            return FileSystem if name == "FileSystem" else getattr(pafs, name)

    monkeypatch.setattr("mutransfer.results.fs.pafs", NoNetwork())


def _sweep(folder: Path, **top) -> Path:
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny_sweep("probe"), **top}))
    return path


def test_submit_to_a_bucket_only_the_cluster_reaches_is_sent_with_a_note(tmp_path, capsys,
                                                                           monkeypatch,
                                                                           dashboard):
    """Before: refused, `error: storage s3://...: not a location pyarrow can open (When
    resolving region ...)`, though only the cluster needs to reach the bucket."""
    _no_network(monkeypatch)
    sweep = _sweep(tmp_path)
    assert main(["submit", str(sweep), "--dashboard", "http://head:8265", "--working-dir",
                 str(tmp_path), "--storage", "s3://bucket/results/probe"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "raysubmit_1"
    assert "--storage s3://bucket/results/probe" in Dashboard.submitted[0]["entrypoint"]
    assert "cannot open it from this machine" in err
    assert "the job's driver checks it on the cluster" in err


def test_a_store_pyarrow_cannot_look_at_is_one_line_not_a_bare_arrow_exception():
    """Azure without credentials: pyarrow raises a bare ArrowException (no OSError), which
    ended `sweep` and `submit` in a traceback."""

    class NoCredentials:
        type_name = "abfs"

        def get_file_info(self, path):
            raise pa.ArrowException("Unknown error: Check for Hierarchical Namespace support "
                                    "failed: Failed to get token from DefaultAzureCredential.")

    with pytest.raises(StorageUnreachable, match="c/x .abfs.: cannot look at it from this "
                                                 "machine .Unknown error"):
        not_a_folder(NoCredentials(), "c/x")


def test_a_file_uri_storage_is_checked_on_every_node_like_a_plain_path(tmp_path, monkeypatch):
    """A file:// store is each node's own disk; before, as a URI it was not checked and each
    node wrote its trials where the driver never read them."""
    from mutransfer.sweep.run.cluster import check_nodes_see

    fake_cluster(monkeypatch, {"10.0.0.1": True, "10.0.0.2": False})
    with pytest.raises(UserError, match=r"1 of the cluster's 2 nodes do not see .*10\.0\.0\.2"):
        check_nodes_see(f"file://{tmp_path}/results/x")
    assert list(tmp_path.iterdir()) == []  # the marker is gone


@pytest.mark.parametrize("address", ["127.0.0.1:6379", "localhost:6379", "[::1]:6379",
                                     "ray://localhost:10001", "auto"])
def test_a_cluster_reached_at_localhost_has_its_nodes_storage_checked(address):
    """A driver on the head (`sweep --address localhost:6379`) runs trials on the nodes that
    joined the cluster, wherever they are; before, their storage was not checked."""
    from mutransfer.sweep.run.cluster import is_remote_address

    assert is_remote_address(address)
    assert not is_remote_address(None) and not is_remote_address("local")


# -- logs --follow ------------------------------------------------------------------------------

def test_a_log_stream_that_breaks_off_is_one_line_after_what_came(monkeypatch, capsys):
    """Before: the head restarting under `logs --follow` ended it in a RuntimeError traceback."""

    class Following:
        def get_job_info(self, job_id):
            return object()

        async def tail_job_logs(self, job_id):
            yield "step 10 loss 4.1\n"
            raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    monkeypatch.setattr(jobs, "client", lambda address: Following())
    assert main(["logs", "raysubmit_1", "--dashboard", "http://head:8265", "--follow"]) == 2
    out, err = capsys.readouterr()
    assert out == "step 10 loss 4.1\n"
    assert len(err.strip().splitlines()) == 1
    assert "the log stream broke off (WebSocket connection closed" in err
    assert "the job is not stopped" in err


# -- data the job's upload leaves out -----------------------------------------------------------

@pytest.fixture
def project(tmp_path) -> Path:
    """A working directory with a corpus under data/ (never uploaded), one under corpus/,
    and one under notes/ that a .gitignore leaves out."""
    for rel in ("data/c.txt", "corpus/c.txt", "notes/c.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("the state space model " * 400)
    (tmp_path / ".gitignore").write_text("notes/\n")
    return tmp_path


@pytest.mark.parametrize("path, why", [
    ("data/c.txt", "data/c.txt is excluded by the job's excludes"),
    ("data/*.txt", "data/c.txt is excluded by the job's excludes"),
    ("notes", "notes/c.txt is excluded by {root}/.gitignore"),
    ("../c.txt", "is outside it"),
    ("corpus/none.txt", "there is nothing at {root}/corpus/none.txt here to upload"),
])
def test_a_relative_data_path_the_upload_leaves_out_is_refused_before_sending(
        project, dashboard, capsys, monkeypatch, path, why):
    """Before: sent; the job then failed on the cluster, its copy of the folder lacking the
    data that is right there on this machine."""
    monkeypatch.chdir(project)
    sweep = _sweep(project, data={"source": "text", "path": path})
    assert main(["submit", str(sweep), "--dashboard", "http://head:8265",
                 "--storage", str(project / "results")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"data.path {path} is relative" in err and why.format(root=project) in err, err
    assert "give the absolute path where every node has it" in err
    assert Dashboard.submitted == []


@pytest.mark.parametrize("path", ["corpus/c.txt", "corpus", "corpus/*.txt"])
def test_a_relative_data_path_that_goes_up_with_the_job_is_sent(project, dashboard, capsys,
                                                                 monkeypatch, path):
    monkeypatch.chdir(project)
    sweep = _sweep(project, data={"source": "text", "path": path})
    assert main(["submit", str(sweep), "--dashboard", "http://head:8265",
                 "--storage", str(project / "results")]) == 0
    assert [j["entrypoint"] for j in Dashboard.submitted] == [
        f"python -m mutransfer.cli sweep s.yaml --address auto --storage {project}/results"]


# -- doctor on a machine without a GPU ----------------------------------------------------------

@pytest.mark.parametrize("resources, train, says", [
    ({"gpus_per_trial": 1}, {}, "a trial asks for 1 GPUs (resources.gpus_per_trial) but this "
                                "machine has 0"),
    ({"gpus_per_trial": 0}, {"device": "cuda"}, "train.device cuda, but this machine has no "
                                                "CUDA device"),
])
def test_doctor_without_a_cluster_is_not_ready_for_a_gpu_sweep_on_a_machine_without_one(
        tmp_path, monkeypatch, capsys, resources, train, says):
    """Before: `ready`, and the sweep then refused to start (or every trial failed)."""
    import torch

    from mutransfer.ops import check

    monkeypatch.setattr(check, "TYPICAL_CPU", (1, 32, 4, 64))  # the timing: a small shape
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.chdir(tmp_path)
    doc = tiny_sweep("gpu", data={"source": "synthetic"}, resources=resources)
    doc["train"].update(train)
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(doc))
    assert main(["doctor", "gpu.yaml"]) == 2
    out, err = capsys.readouterr()
    assert "ready" not in out
    assert err.strip() == f"error: gpu.yaml: {says}; run it on a cluster (doctor --address " \
                          f"HEAD:6379 checks one)"


# a GCS bucket behind an endpoint that refuses every connection: pyarrow's client retries
# (credentials, then the request) for 15 minutes by default, wherever the test runs
UNREACHABLE_GCS = "gs://bucket/results?endpoint_override=127.0.0.1:9&scheme=http"


def _finishes(monkeypatch, argv: list[str], wait_s: float = 120.0) -> int:
    """main(argv) with a 1 s first look at storage, in a thread given `wait_s` (before: it
    sat in pyarrow's retries for 15 minutes, then looked again)."""
    monkeypatch.setattr("mutransfer.results.fs.FIRST_CONTACT_S", 1, raising=False)
    monkeypatch.setattr("mutransfer.results.fs.UNREACHABLE_KEPT_S", 0.0, raising=False)
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(main(argv)), daemon=True)
    thread.start()
    thread.join(wait_s)
    assert done, f"still looking at the storage after {wait_s:.0f} s"
    return done[0]


def test_submit_to_a_gcs_bucket_this_machine_cannot_reach_is_sent_after_one_short_look(
        tmp_path, capsys, monkeypatch, dashboard):
    sweep = _sweep(tmp_path)
    assert _finishes(monkeypatch, ["submit", str(sweep), "--dashboard", "http://head:8265",
                                   "--working-dir", str(tmp_path), "--storage",
                                   UNREACHABLE_GCS]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "raysubmit_1"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cannot reach it from this machine" in lines[0], err
    assert "the job's driver checks it on the cluster" in lines[0]


def test_a_sweep_on_a_gcs_bucket_this_machine_cannot_reach_is_one_line_and_exit_2(
        tmp_path, capsys, monkeypatch):
    sweep = _sweep(tmp_path)
    assert _finishes(monkeypatch, ["sweep", str(sweep), "--storage", UNREACHABLE_GCS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot reach it from this machine" in err, err
    assert len(err) < 400, err  # the client's 900-character status, cut after its first sentence
