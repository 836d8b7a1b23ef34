"""`mutransfer validate FILE` (check a sweep file, its size and its data, count its cells) and
`mutransfer schema`. A file that `sweep` would refuse fails here too, with the same line."""

from __future__ import annotations

import json


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
        plan = prepare(path, check_data=args.data, max_cells=args.max_cells)
        what = strategy_for(plan.spec.search.kind).summary(plan, Work())
        print(f"{path}: ok, {what} -> {plan.spec.storage_location}"
              + ("" if args.data else " (data not checked)")
              + factory_note(plan, args.import_model))
        print(plan_cost(plan, args.gpu, args.mfu))
    return 0

