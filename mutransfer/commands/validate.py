"""`mutransfer validate FILE` (check a sweep file, count its cells) and `mutransfer schema`."""

from __future__ import annotations

import json

HELP = "check a sweep file and count its cells"


def add_arguments(p, name: str) -> None:
    if name == "validate":
        p.add_argument("file", nargs="+", help="sweep file(s) (YAML)")
        p.add_argument("--data", action="store_true",
                       help="also fail (exit 2) when the sweep's data is not present here")
    p.set_defaults(_name=name)


def run(args) -> int:
    if args._name == "schema":
        from mutransfer.sweep.spec import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    from mutransfer.errors import UserError
    from mutransfer.sweep.driver import check_data_present, prepare
    from mutransfer.sweep.listing import transfer_summary
    from mutransfer.sweep.transfer import TransferSearch

    for path in args.file:
        plan = prepare(path, check_data=args.data)
        if plan.adaptive:
            what = (f"{len(plan.groups)} groups x {plan.spec.search.trials_per_width} "
                    f"{plan.spec.search.kind} trials = {plan.n_trials} trials")
        elif plan.transfer:
            what = transfer_summary(TransferSearch.of_cells(plan.cells, plan.spec.search, {}))
        else:
            what = f"{len(plan.cells)} cells"
        print(f"{path}: ok, {what} -> {plan.spec.storage_location}")
        if not args.data:
            try:  # a file is valid without its data; say whether it could run here
                check_data_present(plan)
            except UserError as exc:
                print(f"  note: {exc}")
    return 0
