"""One driver per store: the lease a sweep driver takes, how a second driver is refused, and
how the lease of a driver that died is taken over (and what that driver left running ended)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.errors import UserError
from mutransfer.results import lease as lease_module
from mutransfer.results.lease import LEASE, Lease, read_holder
from mutransfer.results.store import Store
from tests.sweeps import tiny_sweep


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "results")
    s.ensure_writable()
    return s


def test_a_second_lease_on_a_held_store_is_refused_naming_the_holder(store):
    first = Lease(store, command="mutransfer sweep a.yaml")
    first.acquire(settle_s=0)
    try:
        with pytest.raises(UserError) as caught:
            Lease(store, command="mutransfer sweep b.yaml").acquire(settle_s=0)
        message = str(caught.value)
        assert "in use by another sweep driver" in message and "\n" not in message
        assert f"pid {first.holder.pid}" in message and "mutransfer sweep a.yaml" in message
    finally:
        first.release()
    assert read_holder(store) is None  # released: the file is gone
    second = Lease(store)
    second.acquire(settle_s=0)
    second.release()


def test_of_two_drivers_that_write_at_once_only_the_last_writer_holds(store):
    a, b = Lease(store), Lease(store)
    a._write()
    b._write()  # both found the store free; b wrote last
    with pytest.raises(UserError):
        a.acquire(settle_s=0)  # a reads b's live lease and refuses
    assert read_holder(store).token == b.holder.token


def test_a_killed_holder_on_this_host_is_taken_over_and_its_leftovers_ended(store):
    """What a SIGKILLed driver started (its local Ray) outlives it and carries its lease token
    in its environment; the next driver takes the lease at once and ends those processes,
    and nothing else."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = Lease(store)
    old.holder.pid, old.holder.pid_start = dead.pid, "1"
    store.write_text(LEASE, json.dumps(old.holder.__dict__))
    env = {**os.environ, lease_module.LEASE_ENV: old.holder.token}
    leftover = subprocess.Popen(["sleep", "300"], env=env)
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        new = Lease(store)
        ended = new.acquire(settle_s=0)
        assert ended == [leftover.pid]
        assert leftover.wait(timeout=10) == -9
        assert bystander.poll() is None
        assert os.environ[lease_module.LEASE_ENV] == new.holder.token  # for what it starts
        new.release()
        assert lease_module.LEASE_ENV not in os.environ
    finally:
        leftover.kill()
        bystander.kill()


def test_a_holder_on_another_host_is_live_until_its_heartbeat_is_stale(store):
    other = Lease(store)
    other.holder.host, other.holder.pid = "elsewhere", 1
    store.write_text(LEASE, json.dumps(other.holder.__dict__))
    with pytest.raises(UserError, match="on elsewhere"):
        Lease(store).acquire(settle_s=0)
    other.holder.heartbeat = time.time() - lease_module.STALE_S - 1
    store.write_text(LEASE, json.dumps(other.holder.__dict__))
    taken = Lease(store)
    assert taken.acquire(settle_s=0) == []  # nothing of another host's is ended
    taken.release()


def test_a_holder_in_another_pid_namespace_of_this_host_is_live_by_its_heartbeat(
        store, monkeypatch):
    """A container sharing this host's name and kernel but not its process list (host
    networking): its driver's pid means nothing here, so its fresh heartbeat decides. Before,
    the pid (absent here) said dead and its lease was taken: two drivers on one store."""
    real = os.readlink
    monkeypatch.setattr(os, "readlink", lambda p: "pid:[4026531999]" if p == "/proc/self/ns/pid"
                        else real(p))
    other = Lease(store)  # written in the other namespace: the same host and boot
    monkeypatch.setattr(os, "readlink", real)
    other.holder.pid = 2**22 + 7  # no such process here
    store.write_text(LEASE, json.dumps(other.holder.__dict__))
    with pytest.raises(UserError, match="in use by another sweep driver"):
        Lease(store).acquire(settle_s=0)


def soon(condition, timeout_s: float = 60.0) -> bool:
    """Whether `condition()` holds within `timeout_s` (checked every 10 ms)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_heartbeat_keeps_the_lease_fresh_and_never_overwrites_another(store, monkeypatch):
    monkeypatch.setattr(lease_module, "HEARTBEAT_S", 0.05)
    held = Lease(store)
    held.acquire(settle_s=0)
    first = read_holder(store).heartbeat
    assert soon(lambda: read_holder(store).heartbeat > first)
    intruder = Lease(store)
    intruder._write()  # someone removed ours and took the store
    assert soon(lambda: held.lost is not None)  # the next beat finds it
    assert read_holder(store).token == intruder.holder.token
    assert held.lost.token == intruder.holder.token
    held.release()
    assert read_holder(store).token == intruder.holder.token  # not ours: left in place


def test_sweep_and_submit_refuse_a_store_another_driver_holds(tmp_path, capsys):
    storage = tmp_path / "results"
    store = Store(storage)
    store.ensure_writable()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny_sweep("held"), "storage": str(storage)}))
    holder = Lease(store, command="mutransfer sweep other.yaml")
    holder.acquire(settle_s=0)
    try:
        before = sorted(p.name for p in storage.iterdir())
        for argv in (["sweep", str(path)],
                     ["submit", str(path), "--address", "http://127.0.0.1:1",
                      "--working-dir", str(tmp_path)]):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "in use by another sweep driver" in err[0], err
            assert "mutransfer sweep other.yaml" in err[0]
        assert sorted(p.name for p in storage.iterdir()) == before  # nothing written
    finally:
        holder.release()
