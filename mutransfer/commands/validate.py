"""`mutransfer validate FILE` (check a sweep file, its size and its data, count its cells) and
`mutransfer schema`. A file that `sweep` would refuse fails here too, with the same line."""

from __future__ import annotations

import json


def add_arguments(p, name: str) -> None:
    import argparse

    from mutransfer.commands.sweep import add_max_cells

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


def add_cost_options(p) -> None:
    """--gpu and --mfu, shared with `sweep --dry-run`."""
    from mutransfer.cost.gpus import GPUS

    p.add_argument("--gpu", default=None, choices=sorted(GPUS), type=str.lower,
                   help="GPU the cost table's GPU-hours are for (default: h100 for a sweep "
                        "on cuda, none for a CPU sweep)")
    p.add_argument("--mfu", type=float, default=None, metavar="F",
                   help="GPU-hours at this fraction of the GPU's peak FLOP/s instead of the "
                        "measured throughput (benchmarks/README.md)")


def run(args) -> int:
    if args._name == "schema":
        from mutransfer.sweep.spec import json_schema

        print(json.dumps(json_schema(), indent=2))
        return 0
    from mutransfer.sweep.driver import prepare
    from mutransfer.sweep.packing import plan_cost
    from mutransfer.sweep.search import Work, strategy_for

    for path in args.file:
        plan = _checked_plan(prepare, path, args)
        what = strategy_for(plan.spec.search.kind).summary(plan, Work())
        print(f"{path}: ok, {what} -> {plan.spec.storage_location}"
              + ("" if args.data else " (data not checked)") + _factory_note(plan, args))
        print(plan_cost(plan, args.gpu, args.mfu))
    return 0


def _checked_plan(prepare, path: str, args):
    """The sweep's plan, its data checked unless --no-data; a file refused only for its data
    is refused with the hint that --no-data checks the file without it."""
    from mutransfer.errors import UserError

    try:
        return prepare(path, check_data=args.data, max_cells=args.max_cells)
    except UserError as exc:
        if not args.data:
            raise
        prepare(path, check_data=False, max_cells=args.max_cells)  # raises what is not data's
        raise UserError(f"{exc} (data only on the cluster? `--no-data` checks the file "
                        f"without it)") from None


def _factory_note(plan, args) -> str:
    """Probe the user factories of the plan (--import), or say they were not imported."""
    from mutransfer.config import TrialConfig

    configs = sorted((TrialConfig.model_validate(c.config) for c in plan.cells),
                     key=lambda t: t.width)
    configs = [t for t in configs if not t.model.builtin]
    if not configs:
        return ""
    archs = sorted({t.model.arch for t in configs})
    if not args.import_model:
        return f" (model {', '.join(archs)} not imported: --import runs its code to check it)"
    from mutransfer.data import load_data
    from mutransfer.models.factory import probe

    seen = set()
    for t in configs:
        key = (t.model.model_dump_json(), t.width)
        if key in seen or t.width not in (configs[0].width, configs[-1].width):
            continue
        seen.add(key)
        probe(t, load_data(t.data).spec)
    return f" (model {', '.join(archs)} imported and probed)"
