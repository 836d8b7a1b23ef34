"""`mutransfer sweep`: validate, compare with the store, run what is missing, summarise.

Order matters: everything that can be wrong with the input (the file, every cell, the data,
the storage address) is checked before any folder is created or Ray is started, so a bad
sweep writes nothing.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from mutransfer.errors import UserError
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
    out: TextIO = field(default_factory=lambda: sys.stdout)


def prepare(path: str, storage: str | None = None, address: str | None = None,
            check_data: bool = True) -> Plan:
    """The validated plan of a sweep file, with its data and storage checked."""
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
    """Open each distinct data source once on the driver: a missing dataset is reported
    before Ray starts (the data layer's error says where the files should be)."""
    from mutransfer.config import TrialConfig
    from mutransfer.data import load_data

    for data in plan.data_configs():
        try:
            load_data(TrialConfig.model_validate({"data": data}).data)
        except UserError as exc:
            path = data.get("path")
            hint = (f"; put the data at {path} (see the comment at the top of the sweep "
                    f"file) or change data.path") if path and path in str(exc) else ""
            raise UserError(f"{plan.source}: data: {exc}{hint}") from None


def run_sweep(args: SweepArgs) -> int:
    """0: every cell complete; 1: some trials failed for good (re-run to retry them);
    130: stopped (Ctrl-C) before every trial finished (re-run to resume)."""
    out = args.out
    plan = prepare(args.path, args.storage, args.address)
    check_local_resources(args.address, args.num_cpus, args.num_gpus)
    store = Store(plan.spec.storage_location)
    if args.dry_run:
        return dry_run(plan, store, out)
    created = not store.exists()
    store.ensure_writable()
    state = store.scan(repair=True)
    for path in state.set_aside:
        print(f"set aside a damaged part (its cell runs again): {path}", file=out)
    save_sweep_copy(store, plan)
    work = plan_work(plan, state)
    _header(plan, store, work, out)
    failed = unfinished = 0
    if work.n_trials == 0:
        done = "the transfer search is complete" if plan.transfer else "every cell is complete"
        print(f"0 trials to run: {done}", file=out)
    else:
        try:
            outcome = execute(plan, store, work, RunOptions(args.address, args.num_cpus,
                                                            args.num_gpus, out))
        except UserError:
            # refused before any trial ran (e.g. no node has the GPUs a trial needs):
            # a results folder this run created holds nothing yet, so it goes again
            if created:
                store.delete_if_no_results()
            raise
        failed, unfinished = outcome.failed, outcome.unfinished
        print(f"ran {outcome.to_run} trials in {fmt_duration(outcome.elapsed_s)}: "
              f"{outcome.complete} complete, {outcome.diverged} diverged, {outcome.failed} "
              f"failed" + (f", {unfinished} unfinished" if unfinished else ""), file=out)
    out.flush()
    print_summary(store, out, analysis=args.analysis)
    if failed:
        print(f"{failed} trials failed for good; run the sweep again to retry them", file=out)
    if unfinished:
        print(f"stopped with {unfinished} trials unfinished; run the sweep again to resume",
              file=out)
        return 130
    return 1 if failed else 0


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
