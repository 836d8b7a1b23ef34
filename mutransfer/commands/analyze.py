"""`mutransfer analyze RESULTS_DIR`: optimal LR, drift, stability, regret, monotonicity."""

from __future__ import annotations

from pathlib import Path

from mutransfer.errors import UserError


def add_analysis_options(p) -> None:
    """Options shared with `mutransfer plot`."""
    from mutransfer.analysis_defaults import BOOT_SEED, FIT_POINTS, N_BOOT

    p.add_argument("results_dir", metavar="RESULTS_DIR", help="a sweep's results folder")
    p.add_argument("--bootstrap", type=int, default=N_BOOT, metavar="N",
                   help=f"seed resamples for the intervals (default {N_BOOT}; 0: none)")
    p.add_argument("--seed", type=int, default=BOOT_SEED, help="RNG seed of the bootstrap")
    p.add_argument("--fit-points", type=int, default=FIT_POINTS, metavar="K",
                   help=f"LRs nearest the argmin in the quadratic fit (default {FIT_POINTS})")
    p.add_argument("--out", default=None, help="output folder (default RESULTS_DIR/analysis)")


def add_arguments(p, name: str) -> None:
    add_analysis_options(p)


def analysis_from_args(args):
    from mutransfer.analysis import analyze

    if args.bootstrap < 0:
        raise UserError(f"--bootstrap: must be 0 or more, got {args.bootstrap}")
    if args.fit_points < 3:
        raise UserError(f"--fit-points: a quadratic needs at least 3 points, got {args.fit_points}")
    from mutransfer.analysis import analysis_dir
    from mutransfer.commands.outputs import check_output_dir

    check_output_dir(args.out or analysis_dir(args.results_dir))  # before the analysis
    return analyze(args.results_dir, n_boot=args.bootstrap, boot_seed=args.seed,
                   fit_points=args.fit_points)


def run(args) -> int:
    from mutransfer.analysis import analysis_dir, full_text, write_analysis

    a = analysis_from_args(args)
    print(full_text(a))
    out = Path(args.out) if args.out else analysis_dir(args.results_dir)
    paths = write_analysis(a, out)
    print(f"\nwrote {len(paths)} files to {out}/ (tables as .parquet and .csv, analysis.md)")
    return 0
