"""Shared fixtures: small configs and a token data spec; helpers for data-source batches."""

from __future__ import annotations

import contextlib
import itertools
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure
from xdist.scheduler import LoadScopeScheduling

from mutransfer.data import packing, parquet
from mutransfer.data.base import DataSpec
from mutransfer.data.tokenizers import make_tokenizer

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


@pytest.fixture
def no_tiktoken(monkeypatch):
    """tiktoken not installed (what a tokenizer name then says)."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    make_tokenizer.cache_clear()
    yield
    make_tokenizer.cache_clear()


RAY_FIXTURE = "ray_local"
RAY_MARK = "ray"  # a test that starts a Ray of its own (pyproject.toml's markers)


class SharedRay:
    """This process's shared local Ray (2 CPUs, quiet), started by the first test that asks
    for it and ended after the last test of its Ray group, so that no test outside the group
    finds a Ray in its process (tests/test_ray_session.py asserts there is none)."""

    def __init__(self) -> None:
        self._session: contextlib.ExitStack | None = None

    def start(self) -> None:
        from mutransfer.sweep.run.cluster import ray_session

        if self._session is None:
            session = contextlib.ExitStack()
            session.enter_context(ray_session(num_cpus=2))
            self._session = session

    def stop(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()


SHARED_RAY = SharedRay()


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray (2 CPUs, quiet) for every test that asks for it (`SharedRay`). A sweep run
    in this process uses it: `ray_session` takes the Ray this process already has, refusing
    options that Ray cannot honour."""
    SHARED_RAY.start()
    yield
    SHARED_RAY.stop()


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


def ray_group(item: pytest.Item | None) -> str | None:
    """The Ray group of a test: the one its `ray` mark names (default "ray"), or "ray" for a
    test on the shared local Ray; None for a test without Ray."""
    mark = item.get_closest_marker(RAY_MARK) if item is not None else None
    if mark is not None:
        return mark.kwargs.get("group", RAY_MARK)
    return RAY_MARK if RAY_FIXTURE in getattr(item, "fixturenames", ()) else None


def pytest_collection_modifyitems(config, items):
    """The Ray groups run first, each as one block, in its order: the tests that start a Ray
    of their own (other options, another cluster, drivers in subprocesses) while none runs in
    this process, then those on the shared local Ray, which starts once per group and idles
    through no other test. In a pytest-xdist worker the groups are also listed for
    `RayGroupScheduling`."""
    groups = {item.nodeid: ray_group(item) for item in items}
    shared = {item.nodeid for item in items if RAY_FIXTURE in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: (groups[item.nodeid] is None, groups[item.nodeid] or "",
                                 item.nodeid in shared))  # stable: each keeps its order
    if hasattr(config, "workerinput"):
        listing = Path(config.workerinput[RAY_GROUP_LISTING])
        mine = listing.with_name(f"{listing.name}.{config.workerinput['workerid']}")
        mine.write_text("".join(f"{groups[item.nodeid]}\t{item.nodeid}\n" for item in items
                                if groups[item.nodeid] is not None))
        mine.replace(listing)  # whole when read; every worker collects the same tests


# -- two processes (pytest-xdist, `-n 2` in pyproject.toml) ----------------------------------

RAY_GROUP_LISTING = "mutransfer_ray_groups"  # workerinput key: the file listing the groups
_LISTING = pytest.StashKey[Path]()


class RayGroupScheduling(LoadScopeScheduling):
    """xdist's `load` distribution, except that each Ray group is one unit of work, handed out
    first (the largest units go first): a worker runs it, mostly waiting on Ray and on the
    drivers it starts, then takes the other tests. test_faults.py is a group of its own (its
    `ray` mark), so the two Ray groups run side by side, one per worker, and the tests without
    Ray fill in around them: the whole suite on 2 idle cores took 367 s and 328 s so, 419 s with
    all Ray tests one group (the 37 Ray tests alone were faster in one process, 314 s against
    354 s side by side, but then the other worker idles once its own tests are done). (xdist's
    own `--dist loadgroup` does not group under pytest 9.2: xdist 3.8 appends the group to
    `item._nodeid`, which pytest 9.2 no longer reads.) The workers list the groups' tests as
    they collect, before their collections reach this scheduler."""

    def __init__(self, config: pytest.Config, log, listing: Path) -> None:
        super().__init__(config, log)
        self._listing = listing
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            lines = self._listing.read_text().splitlines()
            self._groups = {nodeid: group for group, nodeid in
                            (line.split("\t", 1) for line in lines)}
        return self._groups.get(nodeid, nodeid)


def _listing(config: pytest.Config) -> Path:
    if _LISTING not in config.stash:
        config.stash[_LISTING] = Path(tempfile.mkdtemp(prefix="mutransfer-tests-")) / "ray-group"
    return config.stash[_LISTING]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput[RAY_GROUP_LISTING] = str(_listing(node.config))


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # before xdist's own choice
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "load":  # what `-n` alone asks for
        return RayGroupScheduling(config, log, _listing(config))
    return None


def pytest_unconfigure(config) -> None:
    if _LISTING in config.stash:
        shutil.rmtree(config.stash[_LISTING].parent, ignore_errors=True)


@pytest.fixture(autouse=True)
def _shared_ray_up(request):
    """The shared Ray runs for each test on it, in whatever order the tests come."""
    if RAY_FIXTURE in request.fixturenames:
        SHARED_RAY.start()


@pytest.hookimpl(trylast=True)  # after the test's fixtures are torn down
def pytest_runtest_teardown(item, nextitem):
    """The last test of a Ray group ends the shared Ray: the tests that a process runs after a
    group start without Ray, as the group's first ones do."""
    if ray_group(item) is not None and ray_group(nextitem) != ray_group(item):
        SHARED_RAY.stop()


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


@pytest.fixture
def drawn(monkeypatch):
    """Each figure a plot saves, by file name (read back after it is closed): the figure tests
    read its artists to compare them with the tables."""
    figs: dict[str, Figure] = {}
    save = Figure.savefig

    def keep(fig, path, *args, **kw):
        figs[Path(path).name] = fig
        return save(fig, path, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figs


@pytest.fixture
def small_chunks(monkeypatch):
    """Shuffle chunks of a few batches, so that tests cross chunk and epoch boundaries, and no
    Parquet row group counted or tokenized yet in this process."""
    monkeypatch.setattr(packing, "SHUFFLE_TOKENS", 512)
    parquet._COUNTS.clear()
    parquet._TOKENS.clear()
