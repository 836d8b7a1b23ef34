"""`mutransfer sweep FILE`: run a sweep's missing cells on Ray (mutransfer.sweep.run), then
print how the run went and analyze the store."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from mutransfer.errors import UserError


def add_arguments(p, name: str) -> None:
    from mutransfer.commands.options import cluster_address

    p.add_argument("file", help="sweep file (YAML), e.g. sweeps/quickstart.yaml")
    p.add_argument("--address", default=None, type=cluster_address,
                   help="an existing Ray cluster (HOST:6379, ray://HOST:10001 or auto); "
                        "default: start a local Ray for this run")
    p.add_argument("--storage", default=None,
                   help="results location (path or URI); default: the file's storage, "
                        "else results/NAME")
    p.add_argument("--dry-run", action="store_true",
                   help="list the cells, how many are already done and the cost table "
                        "(--gpu, --mfu); run nothing (data not there yet is only a note)")
    p.add_argument("--no-analysis", action="store_true",
                   help="skip the intervals, tables, plots and report at the end (the "
                        "optimal-LR table only)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    p.add_argument("--num-gpus", type=int, default=None, help="GPUs of the local Ray")
    from mutransfer.commands.options import add_cost_options, add_max_cells

    add_max_cells(p)
    add_cost_options(p)


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
    gpu: str | None = None  # --dry-run's cost table: GPU-hours on this GPU
    mfu: float | None = None  # ... at this fraction of its peak
    out: TextIO = field(default_factory=lambda: sys.stdout)


def run(args) -> int:
    return run_sweep(SweepArgs(path=args.file, address=args.address, storage=args.storage,
                               dry_run=args.dry_run, analysis=not args.no_analysis,
                               num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                               max_cells=args.max_cells, gpu=args.gpu, mfu=args.mfu))


def run_sweep(args: SweepArgs) -> int:
    """0: every cell complete; 1: some trials failed for good (re-run to retry them);
    130: stopped (Ctrl-C) before every trial finished (re-run to resume);
    UserError (exit 2): bad input, or another driver holds the store."""
    from mutransfer.sweep.run import driver

    where = {"storage": args.storage, "address": args.address, "num_cpus": args.num_cpus,
             "num_gpus": args.num_gpus, "max_cells": args.max_cells}
    out = args.out
    if args.dry_run:
        print(driver.dry_run(args.path, **where, gpu=args.gpu, mfu=args.mfu), file=out)
        return 0
    probe_factories(args.path)
    result = driver.run(args.path, **where, out=out)
    if result.to_run == 0:
        from mutransfer.sweep.plan.spec import KINDS

        done = f"the {result.search} search is complete" if \
            KINDS[result.search].part_of_grid else "every cell is complete"
        print(f"0 trials to run: {done}", file=out)
        print_summary(result.storage, out, analysis=args.analysis)
        return 0
    if result.interrupted:
        # a partial grid would give a partial analysis: it waits for the complete run
        print(interrupted_line(result), file=out)
        return 130
    from mutransfer.sweep.run.progress import fmt_duration

    print(f"ran {result.to_run} trials in {fmt_duration(result.elapsed_s)}: "
          f"{result.complete} complete, {result.diverged} diverged, "
          f"{f'{result.stopped} stopped early, ' if result.stopped else ''}{result.failed} "
          f"failed{f', {result.skipped} found stored already' if result.skipped else ''}",
          file=out)
    out.flush()
    print_summary(result.storage, out, analysis=args.analysis)
    if result.failed:
        print(f"{result.failed} trials failed for good; run the sweep again to retry them",
              file=out)
        return 1
    return 0


def probe_factories(spec, storage: str | None = None) -> None:
    """A `package.module:factory` arch is imported and its model probed at the smallest and
    largest width before any trial starts (one line, exit 2, on a bad factory); the sweep runs
    its code anyway. `spec`: a sweep file's path, a dict or a SweepSpec."""
    from mutransfer.config import BUILTIN_ARCHS

    model = _model_section(spec)
    if not isinstance(model, dict) or str(model.get("arch", "mamba")) in BUILTIN_ARCHS:
        return  # nothing to import (a malformed spec: the sweep's own check says why)
    from mutransfer.commands.options import factory_note
    from mutransfer.sweep.run.driver import prepare

    factory_note(prepare(spec, storage, check_data=False), import_model=True)


def _model_section(spec) -> object:
    """The spec's `model:` section, or None where it cannot be read here."""
    import os

    from mutransfer.configbase import read_yaml

    if isinstance(spec, (str, os.PathLike)):
        try:
            return read_yaml(os.fspath(spec)).get("model")
        except UserError:  # unreadable or malformed: the run's own checks say why
            return None
    if isinstance(spec, dict):
        return spec.get("model")
    return getattr(spec, "model", None)


def print_summary(location: str, out: TextIO, analysis: bool = True) -> None:
    """The analysis's optimal-LR and drift summary of the store (`mutransfer analyze` prints
    the same tables in full); with `analysis`, its tables, plots and report written as well."""
    from mutransfer.results.store import DONE_STATUSES, read_tables

    tables = read_tables(location)
    trials = tables.trials
    if not len(trials) or not trials["status"].isin(DONE_STATUSES).any():
        print("no finished trials yet", file=out)
        return
    from mutransfer.analysis import analyze, summary_table

    try:
        result = analyze(location, tables=tables)
        print(summary_table(result), file=out)
    except UserError as exc:  # e.g. every trial failed: says what is missing
        print(f"analysis: {exc}", file=out)
        return
    except Exception as exc:  # the sweep's results are stored; a failing summary must not hide it
        print(f"analysis failed ({type(exc).__name__}: {exc}); run `mutransfer analyze "
              f"{location}` for the details", file=out)
        return
    if analysis:
        _plots(location, result, out)


def _plots(location: str, result: object, out: TextIO) -> None:
    """What `mutransfer analyze` and `mutransfer plot` write: the tables, plots and report."""
    from mutransfer.analysis import analysis_dir, make_plots, write_analysis
    from mutransfer.results.fs import local_folder

    if local_folder(location) is None:  # a bucket; a file:// URI is a folder here
        print("plots: run `mutransfer plot` on a local copy of the results", file=out)
        return
    try:
        paths = [*write_analysis(result, analysis_dir(location)),
                 *make_plots(location, analysis=result)]
    except Exception as exc:
        print(f"plots failed ({type(exc).__name__}: {exc})", file=out)
        return
    if paths:
        folder = str(paths[0]).rsplit("/", 1)[0]
        print(f"tables, plots and report: {folder}/ ({len(paths)} files; `mutransfer analyze "
              f"{location}` prints every table)", file=out)


def interrupted_line(result) -> str:
    """How far a stopped run got: a grid's cells done of all; a search's trials finished in
    this run (its plan holds only the trials it has chosen so far, not what it will run)."""
    from mutransfer.sweep.plan.spec import KINDS

    failed = f", {result.failed} failed for good" if result.failed else ""
    if KINDS[result.search].part_of_grid:
        finished = result.complete + result.diverged + result.stopped
        done = (f"{finished} trial{'' if finished == 1 else 's'} finished in this run{failed} "
                f"(the {result.search} search chooses the rest as it goes)")
    else:
        done = f"{result.planned - result.remaining} of {result.planned} done{failed}"
    return (f"interrupted: {done}; run the sweep again to resume (the analysis waits for a "
            f"complete run)")
