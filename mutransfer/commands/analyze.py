"""`mutransfer analyze RESULTS_DIR`: optimal LR, drift, stability, regret, monotonicity."""

from __future__ import annotations

from pathlib import Path

from mutransfer.errors import UserError


def add_analysis_options(p) -> None:
    """Options shared with `mutransfer plot`."""
    from mutransfer.analysis_defaults import FIT_WINDOW

    p.add_argument("results_dir", metavar="RESULTS_DIR", help="a sweep's results folder")
    p.add_argument("--fit-window", type=float, default=FIT_WINDOW, metavar="OCTAVES",
                   help=f"least half-width of the window lr* is fitted in, in octaves of LR "
                        f"around the optimum (default {FIT_WINDOW:g}; five grid steps where "
                        f"that is wider)")
    p.add_argument("--out", default=None, help="output folder (default RESULTS_DIR/analysis)")
    p.add_argument("--target", default=None, metavar="AXIS",
                   help="the hyperparameter whose optimum is found: lr (default) or any swept "
                        "numeric axis, e.g. param.overrides.ssm_B.lr_mult (default: the sweep "
                        "file's analysis.target)")
    p.add_argument("--scale", nargs="+", default=None, metavar="AXIS",
                   help="the scale axes, each swept: width, model.n_layer, tokens (steps x "
                        "batch x seq_len), ... (default: the sweep file's analysis.scale, else "
                        "width plus model.n_layer and tokens where they vary)")


def add_arguments(p, name: str) -> None:
    add_analysis_options(p)


def analysis_from_args(args):
    """The analysis of RESULTS_DIR and the folder its files go to (`output_folder`), both
    checked before the analysis runs."""
    from mutransfer.analysis import analyze

    if not 0.5 <= args.fit_window <= 10:  # NaN fails too
        raise UserError(f"--fit-window: must be between 0.5 and 10 octaves, got "
                        f"{args.fit_window:g}")
    from mutransfer.results.fs import absolute_location

    absolute_location(args.results_dir)  # a symlink loop, a name too long: one line
    if Path(args.results_dir).is_file():  # named as such, not as the --out it would imply
        raise UserError(f"{args.results_dir}: a file, not a results folder")
    out = output_folder(args.results_dir, args.out)
    return analyze(args.results_dir, fit_window=args.fit_window,
                   target=getattr(args, "target", None), scale=getattr(args, "scale", None)), out


def output_folder(results_dir: str, out: str | None) -> Path:
    """The folder the analysis files go to: --out, else RESULTS_DIR/analysis; checked, and
    as this machine's filesystem names it (`~` expanded, a file:// URI's path), so that the
    folder checked is the one written (before, `--out ~` was checked as the home folder, the
    tables written there and analysis.md into a new folder `~`; `--out file:///x` went half
    into ./file:/x, half into /x). --out '' is refused as written, not read as no --out."""
    from mutransfer.analysis import analysis_dir
    from mutransfer.commands.outputs import (
        check_output_dir,
        check_outside_store_tables,
        local_output_dir,
    )
    from mutransfer.results.fs import local_folder

    store = local_folder(results_dir)
    if out is not None:
        return local_output_dir(out, store=store)
    folder = str(analysis_dir(results_dir))
    check_output_dir(folder)
    check_outside_store_tables(folder, store=store)
    return Path(folder).expanduser()


def run(args) -> int:
    from mutransfer.analysis import full_text, write_analysis

    a, out = analysis_from_args(args)
    print(full_text(a))
    paths = write_analysis(a, out)
    print(f"\nwrote {len(paths)} files to {out}/ (tables as .parquet and .csv, analysis.md)")
    return 0
