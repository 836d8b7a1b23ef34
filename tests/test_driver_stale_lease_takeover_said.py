"""A driver that takes over the stale lease of a driver that is gone says so, naming it, even
when that driver left nothing running (its host lost, or its Ray already gone). Before, the
takeover was said only as "ended N processes ..." when there were leftovers: a lease held by
another host's dead driver was taken silently."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from mutransfer.results import lease as lease_module
from mutransfer.results.lease import LEASE, Lease, takeover_message
from mutransfer.results.store import Store


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "results")
    s.ensure_writable()
    return s


def _stale_lease_of_another_host(store: Store) -> Lease:
    other = Lease(store, command="mutransfer sweep a.yaml")
    other.holder.host, other.holder.pid = "elsewhere", 4242
    other.holder.heartbeat = time.time() - lease_module.STALE_S - 5
    store.write_text(LEASE, json.dumps(other.holder.__dict__))
    return other


def test_taking_a_stale_lease_of_another_host_names_the_driver_that_is_gone(store):
    other = _stale_lease_of_another_host(store)
    taken = Lease(store)
    try:
        ended = taken.acquire(settle_s=0)
        assert taken.taken_from is not None and taken.taken_from.token == other.holder.token
        line = takeover_message(taken.taken_from, ended)
        assert line.startswith("took over the store from a sweep driver that is gone")
        assert "pid 4242 on elsewhere" in line and "mutransfer sweep a.yaml" in line
        assert "ended" not in line and "\n" not in line
    finally:
        taken.release()


def test_taking_the_lease_of_a_killed_driver_here_says_what_was_ended(store):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = Lease(store)
    old.holder.pid, old.holder.pid_start = dead.pid, "1"
    store.write_text(LEASE, json.dumps(old.holder.__dict__))
    taken = Lease(store)
    try:
        ended = taken.acquire(settle_s=0)
        assert taken.taken_from is not None and taken.taken_from.pid == dead.pid
        assert takeover_message(taken.taken_from, [11, 12]).endswith(
            "; ended 2 processes it had left running")
        assert ended == []
    finally:
        taken.release()


def test_a_free_store_is_taken_without_a_takeover(store):
    lease = Lease(store)
    try:
        assert lease.acquire(settle_s=0) == [] and lease.taken_from is None
    finally:
        lease.release()
