"""`mutransfer sweep FILE`: run a sweep's missing cells on Ray and store every result."""

from __future__ import annotations

HELP = "run a sweep file on local Ray or a cluster"


def add_arguments(p, name: str) -> None:
    p.add_argument("file", help="sweep file (YAML), e.g. sweeps/quickstart.yaml")
    p.add_argument("--address", default=None,
                   help="an existing Ray cluster (HOST:6379, ray://HOST:10001 or auto); "
                        "default: start a local Ray for this run")
    p.add_argument("--storage", default=None,
                   help="results location (path or URI); default: the file's storage, "
                        "else results/NAME")
    p.add_argument("--dry-run", action="store_true",
                   help="list the cells and how many are already done; run nothing")
    p.add_argument("--no-analysis", action="store_true",
                   help="skip the analysis and plots at the end (a best-LR table only)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    p.add_argument("--num-gpus", type=int, default=None, help="GPUs of the local Ray")
    add_max_cells(p)


def add_max_cells(p) -> None:
    """--max-cells, shared with validate and submit."""
    from mutransfer.sweep.size import MAX_CELLS

    p.add_argument("--max-cells", type=int, default=None, metavar="N",
                   help=f"refuse a sweep of more than N cells (default {MAX_CELLS:,}): a "
                        f"guard against a mistyped grid")


def run(args) -> int:
    from mutransfer.sweep.driver import SweepArgs, run_sweep

    return run_sweep(SweepArgs(path=args.file, address=args.address, storage=args.storage,
                               dry_run=args.dry_run, analysis=not args.no_analysis,
                               num_cpus=args.num_cpus, num_gpus=args.num_gpus,
                               max_cells=args.max_cells))
