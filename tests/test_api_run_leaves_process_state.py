"""`mutransfer.run` in a notebook or script: once it returns, the calling process is as it
was. Ray and Tune change it and do not put it back: Tune's SIGINT handler stayed installed
after the run (the caller's next Ctrl-C was swallowed), ray.init's SIGTERM handler (sys.exit)
outlived ray.shutdown, ray.init pointed PYTHONBREAKPOINT at Ray's debugger (a breakpoint() in
the notebook then did nothing without debugpy, or waited for a debugpy client with it), and
the sweep's quiet settings (Ray's loggers at ERROR, its environment variables) silenced the
caller's own later use of Ray."""

from __future__ import annotations

import io
import logging
import os
import signal

import pytest

import mutransfer
from tests.sweeps import tiny_sweep

ray = pytest.importorskip("ray")

# a Ray of its own, started and ended by the run (tests/conftest.py: none runs in this process)
pytestmark = [pytest.mark.ray, pytest.mark.slow]

SIGNALS = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1")
           if hasattr(signal, name)]
LOGGERS = ("ray", "ray.tune")


def process_state() -> dict:
    return {"handlers": {sig: signal.getsignal(sig) for sig in SIGNALS},
            "env": dict(os.environ),
            "levels": {name: logging.getLogger(name).level for name in LOGGERS}}


@pytest.fixture(scope="module")
def around_a_run(tmp_path_factory):
    """The process's state before and after a one-cell sweep run through the API."""
    assert not ray.is_initialized()  # the run starts its own Ray, and ends it
    storage = tmp_path_factory.mktemp("state") / "results"
    doc = tiny_sweep("state", {"width": [16], "lr": [0.001]}, storage=str(storage))
    before = process_state()
    result = mutransfer.run(doc, num_cpus=1, out=io.StringIO())
    assert result.complete == 1 and not ray.is_initialized()
    return before, process_state()


def test_ctrl_c_after_a_run_goes_to_the_callers_handler_not_to_tunes(around_a_run):
    before, after = around_a_run
    assert after["handlers"][signal.SIGINT] is before["handlers"][signal.SIGINT]


def test_sigterm_after_a_run_goes_to_the_callers_handler_not_to_rays(around_a_run):
    before, after = around_a_run
    assert after["handlers"][signal.SIGTERM] is before["handlers"][signal.SIGTERM]


def test_every_signal_handler_a_run_touches_is_set_back(around_a_run):
    before, after = around_a_run
    assert after["handlers"] == before["handlers"]


def test_breakpoint_after_a_run_is_the_callers_debugger_not_rays(around_a_run):
    before, after = around_a_run
    assert after["env"].get("PYTHONBREAKPOINT") == before["env"].get("PYTHONBREAKPOINT")


def test_a_run_leaves_the_environment_as_it_found_it(around_a_run):
    before, after = around_a_run
    changed = {k for k in before["env"].keys() | after["env"].keys()
               if before["env"].get(k) != after["env"].get(k)}
    assert changed == set()


def test_a_run_leaves_rays_loggers_at_the_callers_levels(around_a_run):
    before, after = around_a_run
    assert after["levels"] == before["levels"]
