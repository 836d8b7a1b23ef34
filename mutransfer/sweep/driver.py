"""`mutransfer sweep`: validate, compare with the store, run what is missing, summarise.

Order matters: everything that can be wrong with the input (the file, its size, every cell,
the data and the batches it gives, the storage address and folder) is checked before any
folder is created or Ray is started, so a bad sweep writes nothing. Then the driver takes the
store's lease (mutransfer/results/lease.py): a second driver on the same store refuses.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from mutransfer.errors import UserError
from mutransfer.results.lease import Lease, busy_message, live_holder
from mutransfer.results.store import Store, StoreState
from mutransfer.sweep.cluster import check_local_resources, check_storage_reachable, probe
from mutransfer.sweep.grid import Plan, load_plan
from mutransfer.sweep.listing import (
    cell_listing,
    group_listing,
    transfer_listing,
    transfer_summary,
)
from mutransfer.sweep.progress import fmt_duration
from mutransfer.sweep.runner import RunOptions, Work, execute, plan_work
from mutransfer.sweep.size import check_size
from mutransfer.sweep.spec import load_spec
from mutransfer.sweep.summary import print_summary


@dataclass
class SweepArgs:
    path: str
    address: str | None = None
    storage: str | None = None
    dry_run: bool = False
    analysis: bool = True
    num_cpus: int | None = None
    num_gpus: int | None = None
    max_cells: int | None = None  # refuse larger sweeps (default: size.MAX_CELLS)
    out: TextIO = field(default_factory=lambda: sys.stdout)


def prepare(path: str, storage: str | None = None, address: str | None = None,
            check_data: bool = True, max_cells: int | None = None) -> Plan:
    """The validated plan of a sweep file, with its size, data and storage checked."""
    check_size(load_spec(path), path, max_cells)  # before a single cell is built
    plan = load_plan(path)
    if storage is not None:
        plan.spec.storage = storage
    check_storage_reachable(plan.spec.storage_location, address)
    if address is not None and address != "local":
        probe(address)  # an unreachable cluster is an input error: found before writing
    if check_data:
        check_data_present(plan)
    return plan


def check_data_present(plan: Plan) -> None:
    """Open each distinct data source once on the driver and draw a batch of each split in
    each shape its trials use: a missing dataset, or one too small for a batch, is reported
    before Ray starts (the data layer's error says where the files should be)."""
    from mutransfer.data.config import DataConfig
    from mutransfer.data.preflight import check_batches, shapes_by_data

    configs = [u.config for u in (plan.groups if plan.adaptive else plan.cells)]
    for data, shapes in shapes_by_data(configs):
        try:
            check_batches(DataConfig.model_validate(data), shapes)
        except UserError as exc:
            path = data.get("path")
            hint = (f"; put the data at {path} (see the comment at the top of the sweep "
                    f"file) or change data.path") if path and path in str(exc) else ""
            raise UserError(f"{plan.source}: data: {exc}{hint}") from None


def run_sweep(args: SweepArgs) -> int:
    """0: every cell complete; 1: some trials failed for good (re-run to retry them);
    130: stopped (Ctrl-C) before every trial finished (re-run to resume);
    UserError (exit 2): bad input, or another driver holds the store."""
    plan = prepare(args.path, args.storage, args.address, max_cells=args.max_cells)
    check_local_resources(args.address, args.num_cpus, args.num_gpus)
    store = Store(plan.spec.storage_location)
    store.check_is_store()
    if args.dry_run:
        return dry_run(plan, store, args.out)
    created = not store.exists()
    lease = Lease(store)
    if not created and (holder := live_holder(store)) is not None:  # before writing anything
        raise UserError(busy_message(store, holder))
    store.ensure_writable()
    ended = lease.acquire()
    try:
        if ended:
            print(f"ended {len(ended)} processes a killed driver of this store had left "
                  f"running", file=args.out)
        return _run_holding_lease(args, plan, store)
    except UserError:
        # refused before any trial ran (e.g. no node has the GPUs a trial needs):
        # a results folder this run created holds nothing yet, so it goes again
        lease.release()  # first: its heartbeat must not write into a folder being removed
        if created:
            store.delete_if_no_results()
        raise
    finally:
        lease.release()


def _run_holding_lease(args: SweepArgs, plan: Plan, store: Store) -> int:
    out = args.out
    state = store.scan(repair=True)
    for path in state.set_aside:
        print(f"set aside a damaged part (its cell runs again): {path}", file=out)
    save_sweep_copy(store, plan)
    work = plan_work(plan, state)
    _header(plan, store, work, out)
    if work.n_trials == 0:
        done = "the transfer search is complete" if plan.transfer else "every cell is complete"
        print(f"0 trials to run: {done}", file=out)
        print_summary(store, out, analysis=args.analysis)
        return 0
    outcome = execute(plan, store, work, RunOptions(args.address, args.num_cpus,
                                                    args.num_gpus, out))
    if outcome.unfinished:
        # a partial grid would give a partial analysis: it waits for the complete run
        left = plan_work(plan, store.scan(repair=False)).n_trials
        failed = f", {outcome.failed} failed for good" if outcome.failed else ""
        print(f"interrupted: {plan.n_trials - left} of {plan.n_trials} done{failed}; run the "
              f"sweep again to resume (the analysis waits for a complete run)", file=out)
        return 130
    print(f"ran {outcome.to_run} trials in {fmt_duration(outcome.elapsed_s)}: "
          f"{outcome.complete} complete, {outcome.diverged} diverged, {outcome.failed} "
          f"failed", file=out)
    out.flush()
    print_summary(store, out, analysis=args.analysis)
    if outcome.failed:
        print(f"{outcome.failed} trials failed for good; run the sweep again to retry them",
              file=out)
        return 1
    return 0


def _header(plan: Plan, store: Store, work: Work, out: TextIO) -> None:
    """`work` is plan_work's answer: the rest of the plan's cells (or trials) is complete."""
    to_run = work.n_trials
    if work.search is not None:
        print(f"sweep {plan.spec.name}: {transfer_summary(work.search)}; "
              f"{len(plan.cells) - len(work.cells)} complete, {to_run} to run now -> "
              f"{store.location}", file=out)
        return
    unit = "trials" if plan.adaptive else "cells"
    print(f"sweep {plan.spec.name}: {plan.n_trials} {unit}, {plan.n_trials - to_run} complete, "
          f"{to_run} to run -> {store.location}", file=out)


def dry_run(plan: Plan, store: Store, out: TextIO) -> int:
    """List the cells and what the store already holds; write nothing, start nothing."""
    state = store.scan(repair=False) if store.exists() else StoreState()
    holder = live_holder(store) if store.exists() else None
    if holder is not None:
        print(f"note: a sweep driver is running on this store ({holder.describe()})", file=out)
    work = plan_work(plan, state)
    _header(plan, store, work, out)
    if state.corrupt:
        print(f"{len(state.corrupt)} damaged parts would be set aside and re-run", file=out)
    listing = group_listing(plan, work) if plan.adaptive else \
        transfer_listing(work.search) if work.search is not None else cell_listing(plan, state)
    print(listing, file=out)
    return 0


def save_sweep_copy(store: Store, plan: Plan) -> None:
    """sweep.yaml: the file as run; an earlier, different version moves to history/."""
    old = store.read_text("sweep.yaml")
    if old == plan.file_text:
        return
    if old is not None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        store.write_text(f"history/sweep-{stamp}.yaml", old)
    store.write_text("sweep.yaml", plan.file_text)
