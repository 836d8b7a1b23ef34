"""Shared fixtures: small configs and a token data spec; helpers for data-source batches."""

from __future__ import annotations

import itertools
import subprocess
import uuid

import pytest
import torch

from mutransfer.data.base import DataSpec

BYTES = DataSpec(kind="tokens", vocab_size=256, input_dim=None, output_dim=256, loss="ce")


def take(batches, n: int) -> list:
    """The first n (inputs, targets) batches of an iterator."""
    return list(itertools.islice(batches, n))


def same(a: list, b: list) -> bool:
    """Two lists of (inputs, targets) batches are equal, batch for batch."""
    return len(a) == len(b) and all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1])
                                    for p, q in zip(a, b))


@pytest.fixture(autouse=True, scope="session")
def _token_cache_in_tmp(tmp_path_factory):
    """Token caches (and downloads) of the tests go to a folder of this run, never to the
    user's ~/.cache; Ray workers started by the tests inherit it."""
    import os

    old = os.environ.get("MUTRANSFER_DATA_DIR")
    os.environ["MUTRANSFER_DATA_DIR"] = str(tmp_path_factory.mktemp("data-dir"))
    yield
    if old is None:
        os.environ.pop("MUTRANSFER_DATA_DIR", None)
    else:
        os.environ["MUTRANSFER_DATA_DIR"] = old


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread, as a sweep's trial runs (cpus_per_trial 1). The tests' models are tiny:
    a second intra-op thread gains nothing and, on 2 cores shared with Ray's processes or a
    busy machine, waits for a core at every parallel op (test_resume.py at load 40: 193 s at 2
    threads, 42 s at 1). A test about threads sets its own, in a fresh process."""
    torch.set_num_threads(1)
    yield


@pytest.fixture
def byte_spec() -> DataSpec:
    return BYTES


RAY_FIXTURE = "ray_local"


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray (2 CPUs, quiet) for every test that asks for it: started by the first,
    ended with the session. A sweep run in this process uses it (`ray_session` takes the Ray
    this process already has, refusing options that Ray cannot honour)."""
    from mutransfer.sweep.run.cluster import ray_session

    with ray_session(num_cpus=2):
        yield


@pytest.fixture(scope="session")
def diverging_sweep(tmp_path_factory, ray_local):
    """One sweep, run once for the tests that read it, of a cell that diverges (lr 1000) beside
    one that trains (lr 0.001): its sweep file, exit code and printed output."""
    import io

    from mutransfer.commands.sweep import SweepArgs, run_sweep
    from tests.sweeps import write_sweep

    path = write_sweep(tmp_path_factory.mktemp("diverging"), "div",
                       {"width": [16], "lr": [1000.0, 0.001]})
    out = io.StringIO()
    rc = run_sweep(SweepArgs(str(path), analysis=False, out=out))
    return path, rc, out.getvalue()


def pytest_collection_modifyitems(items):
    """The modules with a test on the shared local Ray run last, in their order: the Ray starts
    once and idles through no other module, and the tests that start a Ray of their own in this
    process (other options, another cluster) run before it exists."""
    shared = {item.path for item in items if RAY_FIXTURE in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: item.path in shared)  # stable: each module keeps its order


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs mounted for the test (needs CAP_SYS_ADMIN: skipped without it)."""
    mnt = tmp_path / f"mnt-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
