"""Submitting to a cluster whose job agent is still starting: Ray answers "No available agent
to submit job, please try again later" and creates nothing; `submit` tries again. Any other
refusal is final at once."""

from __future__ import annotations

import pytest

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
