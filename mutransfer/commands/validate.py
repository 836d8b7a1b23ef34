"""`mutransfer validate FILE` (check a sweep file, its size and its data, count its cells; or
a check file, as `mutransfer check` loads it) and `mutransfer schema`. A file that `sweep` (or
`check`) would refuse fails here too, with the same line; with several files, each bad one
gets its line and the others are still checked (exit 2 when any was refused)."""

from __future__ import annotations

import json
import sys

from mutransfer.errors import DataMissing, UserError


def add_arguments(p, name: str) -> None:
    import argparse

    from mutransfer.commands.options import add_cost_options, add_max_cells

    if name == "validate":
        p.add_argument("file", nargs="+", help="sweep or check file(s) (YAML)")
        p.add_argument("--no-data", dest="data", action="store_false",
                       help="skip the data check and the loggers' packages (what is only "
                            "on the cluster)")
        p.add_argument("--data", dest="data", action="store_true", help=argparse.SUPPRESS)
        p.add_argument("--import", dest="import_model", action="store_true",
                       help="import a package.module:factory arch and probe its model (this "
                            "runs the module's code; without it validate never imports it)")
        add_max_cells(p)
        add_cost_options(p)
    p.set_defaults(_name=name)


def run(args) -> int:
    if args._name == "schema":
        from mutransfer.sweep.plan.spec import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    failed = 0
    for path in args.file:
        try:
            _validate_one(path, args)
        except UserError as exc:  # said, and the other files still checked
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    return 2 if failed else 0


def _validate_one(path: str, args) -> None:
    """One sweep or check file: a line saying it is ok and what it runs, or a UserError."""
    from mutransfer.commands.check_spec import is_check_file
    from mutransfer.commands.options import factory_note
    from mutransfer.sweep.plan.packing import plan_cost
    from mutransfer.sweep.run.driver import prepare
    from mutransfer.sweep.search.base import Work
    from mutransfer.sweep.search.registry import plan_work, strategy_for

    if is_check_file(path):
        _validate_check(path, args)
        return
    plan = _checked_plan(prepare, path, args)
    state = _check_local_store(plan.spec.storage_location)
    work = plan_work(plan, state) if state is not None else Work()
    what = strategy_for(plan.spec.search.kind).summary(plan, work)
    cost = plan_cost(plan, args.gpu, args.mfu)  # first: a --gpu it cannot price is refused
    print(f"{path}: ok, {what} -> {plan.spec.storage_location}"
          + _stored_text(plan, state, work)
          + ("" if args.data else " (data not checked)")
          + factory_note(plan, args.import_model, args.data))
    for note in plan.replaced_by_axes():
        print(f"  {note}")
    print(cost)


def _validate_check(path: str, args) -> None:
    """A check file as `mutransfer check` loads it: every refusal it makes before running
    anything (commands/check_plan.py, `checked`), its data unless --no-data, its user model only
    with --import; then what it would run (the cost table with --gpu or --mfu)."""
    from mutransfer.commands import check_plan
    from mutransfer.commands.options import factory_note
    from mutransfer.sweep.plan.packing import plan_cost

    c = check_plan.checked(path, max_cells=args.max_cells)
    if args.data:
        check_plan.check_transfer_data(c.plan, path)
    cost = plan_cost(c.plan, args.gpu, args.mfu) if args.gpu or args.mfu else None
    print(f"{path}: ok, a check file -> {c.out}" + ("" if args.data else " (data not checked)")
          + factory_note(c.plan, args.import_model, args.data))
    print(check_plan.describe(c))
    if cost is not None:
        print(cost)


def _check_local_store(location: str):
    """A local storage that `sweep` would refuse (a file, a folder of other files, a folder
    inside another store, a file:// URI pyarrow cannot open) is refused here too, a plain
    path or a file:// URI alike (before: a file:// URI was not looked at); another URI's
    bucket may be the cluster's alone. What a local store holds (its StoreState), None when
    there is none yet or it is not looked at."""
    from mutransfer.results.fs import is_uri
    from mutransfer.results.store import Store

    # a file:// URI pyarrow cannot open is refused too (local_folder would pass it over)
    if is_uri(location) and location[:7].lower() != "file://":
        return None
    store = Store(location)
    store.check_is_store()
    return store.scan(repair=False) if store.exists() else None


def _stored_text(plan, state, work) -> str:
    """' (N stored, M to run)' for a store that holds some of the plan's trials: a finished
    sweep read 'ok, 108 cells' as if nothing had run (only --dry-run said so)."""
    from mutransfer.sweep.run.driver import stored_count

    stored = stored_count(plan, work) if state is not None else 0
    return f" ({stored} stored, {work.n_trials} to run)" if stored else ""


def _checked_plan(prepare, path: str, args):
    """The sweep's plan, its data (and its loggers' packages) checked unless --no-data; a file
    refused only for either is refused with the hint that --no-data checks it without them."""
    from mutransfer.sweep.run.loggers import check_loggers

    try:
        return prepare(path, check_data=args.data, max_cells=args.max_cells)
    except UserError as exc:
        if not args.data:
            raise
        plan = prepare(path, check_data=False, max_cells=args.max_cells)  # what is not data's
        try:
            check_loggers(plan.spec.loggers)
        except UserError:
            raise UserError(f"{exc} (installed on the cluster only? `--no-data` checks the "
                            f"file without this machine's data and packages)") from None
        if not isinstance(exc, DataMissing):  # data that is there but refused: no hint
            raise
        raise UserError(f"{exc} (data only on the cluster? `--no-data` checks the file "
                        f"without it)") from None
