"""Submitting to a cluster whose job agent is still starting: Ray answers "No available agent
to submit job, please try again later" and creates nothing; `submit` tries again. Any other
refusal is final at once."""

from __future__ import annotations

import pytest

from mutransfer.errors import UserError
from mutransfer.sweep.run.jobs import _connect, _submit_when_an_agent_is_up

NO_AGENT = ("Request failed with status code 500: No available agent to submit job, "
            "please try again later.")


class Dashboard:
    def __init__(self, refusals: list[str]):
        self.refusals = list(refusals)
        self.calls: list[dict] = []

    def submit_job(self, **job):
        self.calls.append(job)
        if self.refusals:
            raise RuntimeError(self.refusals.pop(0))
        return "raysubmit_1"


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)


def test_a_job_agent_still_starting_is_waited_for():
    dash = Dashboard([NO_AGENT, NO_AGENT])
    assert _submit_when_an_agent_is_up(dash, entrypoint="run", submission_id="x") == \
        "raysubmit_1"
    assert dash.calls == [{"entrypoint": "run", "submission_id": "x"}] * 3


def test_any_other_refusal_is_final_at_once():
    dash = Dashboard(["Request failed with status code 400: job x already exists"])
    with pytest.raises(RuntimeError, match="already exists"):
        _submit_when_an_agent_is_up(dash, entrypoint="run")
    assert len(dash.calls) == 1


def test_an_agent_that_never_comes_is_given_up_on():
    dash = Dashboard([NO_AGENT] * 1000)
    with pytest.raises(RuntimeError, match="No available agent"):
        _submit_when_an_agent_is_up(dash, timeout_s=0.0, entrypoint="run")
    assert len(dash.calls) == 1


def test_a_ray_without_token_authentication_connects_without_it(monkeypatch):
    """Ray before 2.52 has no token authentication and no AuthenticationError: the client is
    made once, as on a cluster that asks for no token."""
    import ray.exceptions

    monkeypatch.delattr(ray.exceptions, "AuthenticationError", raising=False)
    made = []

    class Client:
        def __init__(self, url: str):
            made.append(url)

    assert isinstance(_connect(Client, "http://head:8265"), Client)
    assert made == ["http://head:8265"]


# -- where a submitted sweep writes: a relative storage is this machine's folder, if the head
#    sees it --------------------------------------------------------------------------------

class Head:
    """A dashboard whose head runs the storage check's one-liner here (`sees`: True runs it
    on this machine, as a cluster sharing its filesystem; False answers as a head that does
    not; None never ends the job)."""

    def __init__(self, sees: bool | None):
        self.sees, self.jobs, self.deleted, self.stopped = sees, [], [], []

    def submit_job(self, **job):
        self.jobs.append(job)
        return f"raysubmit_{len(self.jobs)}"

    def get_job_status(self, job_id):
        from ray.job_submission import JobStatus

        if self.sees is None:
            return JobStatus.RUNNING
        if not self.sees:
            return JobStatus.FAILED
        import subprocess

        ran = subprocess.run(self.jobs[-1]["entrypoint"], shell=True)
        return JobStatus.SUCCEEDED if ran.returncode == 0 else JobStatus.FAILED

    def delete_job(self, job_id):
        self.deleted.append(job_id)

    def stop_job(self, job_id):
        self.stopped.append(job_id)


def test_a_relative_storage_is_this_machines_folder_when_the_head_sees_it(tmp_path):
    from mutransfer.sweep.run.jobs import shared_storage

    head = Head(sees=True)
    out = shared_storage("results/fineweb_width", tmp_path, lambda: head, "http://head:8265")
    assert out == str(tmp_path / "results" / "fineweb_width")
    assert len(head.jobs) == 1 and head.deleted == ["raysubmit_1"]  # the check, then cleared
    assert list(tmp_path.iterdir()) == []  # the marker is gone, no folder was made


def test_a_relative_storage_the_head_does_not_see_is_one_line_and_leaves_nothing(tmp_path):
    from mutransfer.sweep.run.jobs import shared_storage

    (tmp_path / "results").mkdir()
    with pytest.raises(UserError, match="does not see") as err:
        shared_storage("results/x", tmp_path, lambda: Head(sees=False), "http://head:8265")
    text = str(err.value)
    assert len(text.splitlines()) == 1 and str(tmp_path / "results" / "x") in text
    assert list(tmp_path.rglob("*")) == [tmp_path / "results"]


def test_a_head_that_never_runs_the_check_is_given_up_on(tmp_path, monkeypatch):
    from mutransfer.sweep.run import jobs

    monkeypatch.setattr(jobs, "PROBE_WAIT_S", 0.0)
    head = Head(sees=None)
    with pytest.raises(UserError, match="did not run the check"):
        jobs.shared_storage("results/x", tmp_path, lambda: head, "http://head:8265")
    assert head.stopped == ["raysubmit_1"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("location", ["s3://bucket/results/x", "/shared/results/x"])
def test_a_uri_or_an_absolute_path_is_taken_as_given_without_a_check(tmp_path, location):
    from mutransfer.sweep.run.jobs import shared_storage

    def connect():
        raise AssertionError("the cluster is not asked about a URI or an absolute path")

    assert shared_storage(location, tmp_path, connect, "http://head:8265") == location


# -- a driver on a cluster: every node must see a local storage folder ----------------------

def fake_cluster(monkeypatch, addresses: dict[str, bool]):
    """ray.nodes / remote / get of a cluster whose nodes (NodeManagerAddress -> whether it
    shares this machine's disk; None: it leaves before its check runs) run the check here or
    answer as another disk would."""
    import os

    import ray

    nodes = [{"Alive": True, "NodeID": f"{i:056x}", "NodeManagerAddress": a}
             for i, a in enumerate(addresses)] + [{"Alive": False, "NodeID": "f" * 56}]
    shares = {n["NodeID"]: addresses.get(n.get("NodeManagerAddress"), False) for n in nodes}

    class Pinned:
        def options(self, scheduling_strategy):
            self.node = scheduling_strategy.node_id
            return self

        def remote(self, path):  # a node listed alive that left before its task ran: "gone"
            if shares[self.node] is None:
                return "gone"
            return shares[self.node] and os.path.exists(path)

    def get(ref, timeout=None):  # as Ray's: a list of refs raises the first task's error
        if isinstance(ref, list):
            return [get(r) for r in ref]
        if ref == "gone":
            raise ray.exceptions.TaskUnschedulableError("the node left")
        return ref

    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    monkeypatch.setattr(ray, "remote", lambda **kw: lambda fn: Pinned())
    monkeypatch.setattr(ray, "get", get)


def test_nodes_that_do_not_see_a_local_storage_are_named_before_any_trial(tmp_path, monkeypatch):
    from mutransfer.sweep.run.cluster import check_nodes_see

    fake_cluster(monkeypatch, {"10.0.0.1": True, "10.0.0.2": False})
    with pytest.raises(UserError, match="1 of the cluster's 2 nodes do not see") as err:
        check_nodes_see(str(tmp_path / "results" / "x"))
    assert "(10.0.0.2)" in str(err.value) and len(str(err.value).splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # the marker is gone, no folder was made


def test_a_storage_every_node_sees_or_a_uri_passes_and_a_node_gone_is_no_error(tmp_path,
                                                                                 monkeypatch):
    from mutransfer.sweep.run.cluster import check_nodes_see

    fake_cluster(monkeypatch, {"10.0.0.1": True, "10.0.0.2": True, "10.0.0.3": None})
    check_nodes_see(str(tmp_path / "results"))  # a node gone meanwhile runs no trial
    fake_cluster(monkeypatch, {"10.0.0.1": False})
    check_nodes_see("s3://bucket/results")  # not looked at: a bucket, each node's credentials
    assert list(tmp_path.iterdir()) == []
