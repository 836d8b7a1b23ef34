"""The sweep entry point: validate, compare with the store, run what is missing.

`run(spec | dict | path, ...)` is the Python API (a notebook calls it; `mutransfer sweep` is a
thin shell over it that prints the end of the run and the analysis). Order matters:
everything that can be wrong with the input (the file, its size, every cell, the data and the
batches it gives, the storage address and folder) is checked before any folder is created or
Ray is started, so a bad sweep writes nothing. Then the driver takes the store's lease
(mutransfer/results/lease.py): a second driver on the same store refuses.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from pathlib import Path
from typing import Any, TextIO

import yaml

from mutransfer.configbase import validate
from mutransfer.data.config import DataConfig
from mutransfer.data.preflight import (
    check_batches,
    check_cache_folders,
    prepare_caches,
    shapes_by_data,
)
from mutransfer.errors import DataMissing, UserError, format_validation_error
from mutransfer.results.fs import StorageUnreachable, first_contact
from mutransfer.results.lease import Lease, busy_message, live_holder, takeover_message
from mutransfer.results.store import Store, StoreState, Tables, read_tables
from mutransfer.sweep.plan.cells import Plan, build_plan
from mutransfer.sweep.plan.horizon import describe as horizon_lines
from mutransfer.sweep.plan.packing import check_fit, check_fits_here, plan_cost
from mutransfer.sweep.plan.size import check_size
from mutransfer.sweep.plan.spec import SweepSpec, load_spec
from mutransfer.sweep.run.cluster import check_local_resources, check_storage_reachable, probe
from mutransfer.sweep.run.horizon import run_phases
from mutransfer.sweep.run.loggers import check_loggers
from mutransfer.sweep.run.runner import RunOptions, execute
from mutransfer.sweep.search.base import Work
from mutransfer.sweep.search.registry import plan_work, strategy_for

# what `run` accepts: a validated spec, the same as a mapping (a parsed YAML document), or
# the path of a sweep file
SpecLike = SweepSpec | Mapping[str, Any] | str | os.PathLike


@dataclass(frozen=True)
class SweepResult:
    """What a sweep run did. The store at `storage` holds every result (read it with
    `tables()`); the counts are of this run's trials."""

    name: str
    storage: str  # the store's location (a path or URI)
    search: str  # grid, optuna or transfer
    planned: int  # trials of the whole plan (a transfer search: those it expects)
    to_run: int  # trials this run set out to run (0: the store held every one)
    complete: int = 0
    diverged: int = 0
    failed: int = 0  # failed for good (after the retries); a re-run tries them again
    stopped: int = 0  # ended early by the search's stopping rule (search.stop): stored
    # ended finding their result stored already (an earlier attempt's, a part copied in
    # meanwhile): nothing stored by this run, not counted in `complete`
    skipped: int = 0
    unfinished: int = 0  # neither finished nor failed: the run was stopped (Ctrl-C)
    remaining: int = 0  # trials of the plan still to run after this run
    elapsed_s: float = 0.0
    set_aside: tuple[str, ...] = ()  # damaged parts renamed aside (their cells ran again)
    ended_orphans: int = 0  # processes a killed driver of this store had left, ended

    @property
    def interrupted(self) -> bool:
        """Stopped before every trial finished: run the sweep again to resume."""
        return self.unfinished > 0

    @property
    def ok(self) -> bool:
        """Every trial of the plan is in the store, none failed for good."""
        return not self.interrupted and self.failed == 0 and self.remaining == 0

    def tables(self, include_running: bool = False) -> Tables:
        """The store's trials and steps tables (docs/results-format.md)."""
        return read_tables(self.storage, include_running=include_running)


def run(spec: SpecLike, *, storage: str | None = None, address: str | None = None,
        num_cpus: int | None = None, num_gpus: int | None = None,
        max_cells: int | None = None, out: TextIO | None = None) -> SweepResult:
    """Run the cells of `spec` that the store does not hold yet, on a local Ray (or the
    cluster at `address`), and wait for them. `storage` overrides the spec's; `out` gets
    the header and the live progress line (default stdout). Bad input, or a store another
    driver holds, raises UserError before anything is written."""
    num_cpus, num_gpus = check_counts(num_cpus=num_cpus, num_gpus=num_gpus)
    out = sys.stdout if out is None else check_out(out)
    _check_address(address)
    check_local_resources(address, num_cpus, num_gpus)  # before the spec and its data load
    plan = prepare(spec, storage, address, max_cells=max_cells, runs_here=True)
    store = Store(plan.spec.storage_location)
    store.check_is_store()
    created = not store.exists()
    lease = Lease(store)
    if not created and (holder := live_holder(store)) is not None:  # before writing anything
        raise UserError(busy_message(store, holder))
    store.ensure_writable()
    ended = lease.acquire()
    try:
        if lease.taken_from is not None:  # said even when it left nothing running
            print(takeover_message(lease.taken_from, ended), file=out)
        return _run_holding_lease(plan, store, RunOptions(address, num_cpus, num_gpus, out),
                                  ended=len(ended))
    except BaseException:
        # refused before any trial ran (a UserError: e.g. no node has the GPUs a trial needs),
        # or a crash or Ctrl-C before any result (Ray failing to start): a results folder this
        # run created and that holds no result and no checkpoint yet goes again
        lease.release()  # first: its heartbeat must not write into a folder being removed
        if created:
            store.delete_if_no_results()
        raise
    finally:
        lease.release()


def prepare(spec: SpecLike, storage: str | None = None, address: str | None = None,
            check_data: bool = True, max_cells: int | None = None,
            runs_here: bool = False) -> Plan:
    """The validated plan of a sweep, with its size, data and storage checked; `runs_here`
    (a run or a dry run, not validate or submit): and that this machine could hold its trials,
    before a batch is drawn to check the data."""
    storage = _check_storage(storage)
    _check_address(address)
    (max_cells,) = check_counts(max_cells=max_cells)
    if max_cells is not None and max_cells < 1:  # 0 would refuse every sweep as too large
        raise UserError(f"max_cells {max_cells}: give at least 1")
    sweep, source, text = _load(spec)
    check_size(sweep, source, max_cells)  # before a single cell is built
    # the grid's LRs onto those its store already ran (a widened range: axes.snap_lrs)
    plan = build_plan(sweep, source=source,
                      known_lrs=reachable_lrs(storage or sweep.storage_location, runs_here))
    plan.file_text = text
    try:  # a trial that cannot fit its GPU share: refused now, not as an OOM hours in
        check_fit(plan.spec.resources, [u.config for u in (plan.groups or plan.cells)])
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    if runs_here:
        check_runs_here(plan, address)
    if storage is not None:
        try:
            plan.spec.storage = storage
        except ValueError as exc:  # pydantic's ValidationError: a control character, s3://
            raise UserError(format_validation_error(exc)) from None
    check_storage_reachable(plan.spec.storage_location, address)
    if address is not None and address != "local":
        probe(address)  # an unreachable cluster is an input error: found before writing
    if check_data:  # what this machine runs (a submitted job checks on the cluster)
        check_loggers(plan.spec.loggers)
        check_data_present(plan)
    return plan


def stored_lrs(location: str) -> set[float]:
    """The LRs of the trials a store holds (none where there is no store yet or it cannot be
    read: the run's own checks say why)."""
    try:
        store = Store(location)
        if not store.exists():
            return set()
        rows = store.scan(repair=False).complete.values()
    except Exception:  # an unreadable store is refused where it is used, with its reason
        return set()
    return {float(r["lr"]) for r in rows if isinstance(r.get("lr"), (int, float))}


def reachable_lrs(location: str, runs_here: bool) -> set[float]:
    """stored_lrs of a store this machine reaches (results/fs.first_contact). One it cannot
    reach is a one-line error for a run here; for `submit` and `validate` it holds no LRs
    known here (the job's driver reads the store on the cluster)."""
    try:
        first_contact(location)
    except StorageUnreachable:
        if runs_here:
            raise
        return set()
    return stored_lrs(location)


def check_counts(**counts: Any) -> tuple[int | None, ...]:
    """The count options (num_cpus, num_gpus, max_cells) as ints, in the order given: a
    float, a string or a bool (1.5 CPUs, "2") is refused in one line; None stays None. Their
    ranges are checked where they are used (check_local_resources, `prepare`)."""
    checked = []
    for name, value in counts.items():
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, Integral):
                raise UserError(f"{name}: expected a whole number, got {value!r}")
            value = int(value)
        checked.append(value)
    return tuple(checked)


def check_out(out: Any) -> TextIO:
    """`out` of `run`: a text stream open for writing (a file opened for reading, a closed
    one, or a path is refused before anything is written, not once the store exists)."""
    if not callable(getattr(out, "write", None)) or isinstance(out, type):
        raise UserError(f"out: expected a text stream such as sys.stdout or a file opened "
                        f"for writing, got {type(out).__name__}")
    if getattr(out, "closed", False):
        raise UserError("out: the stream is closed")
    writable = getattr(out, "writable", None)
    if callable(writable) and not writable():
        raise UserError("out: the stream is not open for writing")
    if isinstance(out, (io.RawIOBase, io.BufferedIOBase)) or "b" in str(getattr(out, "mode", "")):
        # before: TypeError 'a bytes-like object is required' at the header, after the store
        # was created
        raise UserError("out: a binary stream; give a text stream (a file opened with 'w', "
                        "io.StringIO, sys.stdout)")
    return out


def _check_storage(storage: Any) -> str | None:
    """The `storage` option: None, or a folder path or URI (a Path is taken as its str)."""
    if storage is None:
        return None
    if not isinstance(storage, (str, os.PathLike)):
        raise UserError(f"storage: expected a folder path or URI, got "
                        f"{type(storage).__name__} {storage!r}")
    storage = os.fspath(storage)
    if not isinstance(storage, str) or not storage.strip():
        raise UserError(f"storage {storage!r}: expected a folder path or URI")
    return storage


def _check_address(address: Any) -> None:
    """The `address` option: None, "local", "auto" or HOST:PORT, a str in any case."""
    if address is not None and not (isinstance(address, str) and address.strip()):
        raise UserError(f"address: expected HOST:PORT, ray://HOST:PORT, auto or local, got "
                        f"{address!r}")


def check_runs_here(plan: Plan, address: str | None) -> None:
    """A sweep run on this machine: no trial larger than its memory (a cluster's nodes have
    memory of their own, and `validate` or `submit` may check a file meant for them)."""
    if address not in (None, "local"):
        return
    try:
        check_fits_here([u.config for u in (plan.groups or plan.cells)])
    except UserError as exc:
        raise UserError(f"{plan.source}: {exc}") from None


def _load(spec: SpecLike) -> tuple[SweepSpec, str, str]:
    """The spec, the name its errors start with, and the text stored as sweep.yaml."""
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        if not isinstance(path, str) or not path.strip():
            raise UserError(f"sweep file {path!r}: expected the path of a sweep file")
        return load_spec(path), path, Path(path).read_text()
    if isinstance(spec, Mapping):
        spec = validate(SweepSpec, dict(spec), source="sweep")
    if not isinstance(spec, SweepSpec):
        raise UserError(f"a sweep is a SweepSpec, a mapping or a file path, not "
                        f"{type(spec).__name__}")
    doc = spec.model_dump(mode="json", exclude_unset=True)
    return spec.model_copy(deep=True), "sweep", yaml.safe_dump(doc, sort_keys=False)


def check_data_present(plan: Plan) -> None:
    """Open each distinct data source once on the driver and draw a batch of each split in
    each shape its trials use: a missing dataset, or one too small for a batch, is reported
    before Ray starts (the data layer's error says where the files should be); and each token
    cache not prepared yet has a folder the run can write it into."""
    configs = [u.config for u in (plan.groups if plan.adaptive else plan.cells)]
    for data, shapes in shapes_by_data(configs):
        try:
            check_batches(DataConfig.model_validate(data), shapes)
        except UserError as exc:
            path = data.get("path")
            # only where the files are absent: a file that is there but malformed (UTF-16, a
            # NUL byte, too short) needs another fix than putting it there
            missing = isinstance(exc, DataMissing)
            hint = (f"; put the data at {path} (see the comment at the top of the sweep "
                    f"file) or change data.path") if missing and path else ""
            error = DataMissing if missing else UserError  # a caller may add hints of its own
            raise error(f"{plan.source}: data: {exc}{hint}") from None
    try:  # after the batches: a missing file is named as missing first
        check_cache_folders(plan.data_configs())
    except UserError as exc:
        raise UserError(f"{plan.source}: {exc}") from None


def prepare_data(plan: Plan, out: TextIO | None = None) -> list[str]:
    """The pre-flight's tokenizing: each text source of the sweep into its token cache
    (mutransfer/data/cache.py) unless it is there, so that no trial tokenizes; the folders."""
    return prepare_caches(plan.data_configs(), out=out)


def _run_holding_lease(plan: Plan, store: Store, options: RunOptions,
                       ended: int) -> SweepResult:
    out = options.out
    state = store.scan(repair=True)
    for path in state.set_aside:
        print(f"set aside a damaged part (its cell runs again): {path}", file=out)
    for path in state.foreign_aside:
        print(f"set aside a file that is no part of this store (it lacks the table's columns): "
              f"{path}", file=out)
    save_sweep_copy(store, plan)
    work = plan_work(plan, state)
    print(header(plan, store, work), file=out)
    for note in plan.replaced_by_axes():
        print(note, file=out)
    base = {"name": plan.spec.name, "storage": store.location, "search": plan.spec.search.kind,
            "set_aside": tuple(state.set_aside), "ended_orphans": ended}
    if work.n_trials == 0:
        return SweepResult(**base, planned=plan.n_trials, to_run=0)
    prepare_data(plan, out)
    outcome = run_phases(plan, store, work, options, execute)  # horizon branching's hook
    left = plan_work(plan, store.scan(repair=False)).n_trials
    return SweepResult(**base, planned=plan.n_trials, to_run=outcome.to_run,
                       complete=outcome.complete - outcome.skipped,
                       diverged=outcome.diverged, stopped=outcome.stopped,
                       failed=outcome.failed, skipped=outcome.skipped,
                       unfinished=outcome.unfinished, remaining=left,
                       elapsed_s=outcome.elapsed_s)


def header(plan: Plan, store: Store, work: Work) -> str:
    """The run's first line; `work` is plan_work's answer: the rest of the plan is stored
    (complete or diverged: run to its end either way, and not run again; 'complete' said so
    of the quickstart's 10 diverged cells, which its last line counts apart)."""
    to_run = work.n_trials
    if plan.part_of_grid:  # it decides as it goes: what it runs at least and at most
        summary = strategy_for(plan.spec.search.kind).summary(plan, work)
        return (f"sweep {plan.spec.name}: {summary}; {stored_count(plan, work)} stored, "
                f"{to_run} to run now -> {store.location}")
    unit = "trials" if plan.adaptive else "cells"
    return (f"sweep {plan.spec.name}: {plan.n_trials} {unit}, {stored_count(plan, work)} "
            f"stored, {to_run} to run -> {store.location}")


def stored_count(plan: Plan, work: Work) -> int:
    """How many of the plan's trials its store holds, as a run's first line counts them."""
    if plan.part_of_grid:
        return len(plan.cells) - len(work.cells)
    return plan.n_trials - work.n_trials


def dry_run(spec: SpecLike, *, storage: str | None = None, address: str | None = None,
            num_cpus: int | None = None, num_gpus: int | None = None,
            max_cells: int | None = None, gpu: str | None = None,
            mfu: float | None = None) -> str:
    """The listing of the cells, what the store already holds and the cost table; writes
    nothing, starts nothing (the same input checks as `run`, but data that is not there yet
    is a note: the plan does not need it)."""
    num_cpus, num_gpus = check_counts(num_cpus=num_cpus, num_gpus=num_gpus)
    plan = prepare(spec, storage, address, check_data=False, max_cells=max_cells,
                   runs_here=True)
    check_loggers(plan.spec.loggers)
    try:
        check_data_present(plan)
        data_note = None
    except UserError as exc:
        data_note = f"note: {exc} (a run would stop here, before any trial)"
    check_local_resources(address, num_cpus, num_gpus)
    store = Store(plan.spec.storage_location)
    store.check_is_store()
    state = store.scan(repair=False) if store.exists() else StoreState()
    holder = live_holder(store) if store.exists() else None
    lines = [] if holder is None else \
        [f"note: a sweep driver is running on this store ({holder.describe()})"]
    if data_note:
        lines.append(data_note)
    work = plan_work(plan, state)
    lines.append(header(plan, store, work))
    lines += plan.replaced_by_axes()
    if state.corrupt:
        lines.append(f"{len(state.corrupt)} damaged parts would be set aside and re-run")
    if state.foreign:
        lines.append(f"{len(state.foreign)} files that are no part of this store would be set "
                     "aside")
    lines.append(strategy_for(plan.spec.search.kind).listing(plan, work, state))
    lines += horizon_lines(plan, state, store if store.exists() else None)
    lines.append(plan_cost(plan, gpu, mfu))
    return "\n".join(lines)


def save_sweep_copy(store: Store, plan: Plan) -> None:
    """sweep.yaml: the file as run; an earlier, different version moves to history/ (as
    it is: one edited by hand in another encoding than UTF-8 too)."""
    old = store.read_bytes("sweep.yaml")
    if old == plan.file_text.encode():
        return
    if old is not None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name, n = f"history/sweep-{stamp}.yaml", 0
        while store.read_bytes(name) is not None:  # changed twice within a second (a script
            n += 1  # looping over variants): each earlier version keeps its own file
            name = f"history/sweep-{stamp}_{n}.yaml"
        store.write_text(name, old)
    store.write_text("sweep.yaml", plan.file_text)
