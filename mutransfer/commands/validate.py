"""`mutransfer validate FILE` (check a sweep file, its size and its data, count its cells) and
`mutransfer schema`. A file that `sweep` would refuse fails here too, with the same line."""

from __future__ import annotations

import json

from mutransfer.errors import UserError


def add_arguments(p, name: str) -> None:
    import argparse

    from mutransfer.commands.options import add_cost_options, add_max_cells

    if name == "validate":
        p.add_argument("file", nargs="+", help="sweep file(s) (YAML)")
        p.add_argument("--no-data", dest="data", action="store_false",
                       help="skip the data check (data that is only on the cluster)")
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
    from mutransfer.commands.options import factory_note
    from mutransfer.sweep.plan.packing import plan_cost
    from mutransfer.sweep.run.driver import prepare
    from mutransfer.sweep.search.base import Work
    from mutransfer.sweep.search.registry import strategy_for

    for path in args.file:
        plan = _checked_plan(prepare, path, args)
        what = strategy_for(plan.spec.search.kind).summary(plan, Work())
        print(f"{path}: ok, {what} -> {plan.spec.storage_location}"
              + ("" if args.data else " (data not checked)")
              + factory_note(plan, args.import_model))
        print(plan_cost(plan, args.gpu, args.mfu))
    return 0


def _checked_plan(prepare, path: str, args):
    """The sweep's plan, its data checked unless --no-data; a file refused only for its data
    is refused with the hint that --no-data checks the file without it."""
    try:
        return prepare(path, check_data=args.data, max_cells=args.max_cells)
    except UserError as exc:
        if not args.data:
            raise
        prepare(path, check_data=False, max_cells=args.max_cells)  # raises what is not data's
        raise UserError(f"{exc} (data only on the cluster? `--no-data` checks the file "
                        f"without it)") from None
