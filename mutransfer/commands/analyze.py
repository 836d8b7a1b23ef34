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
    from mutransfer.analysis import analyze

    if not 0.5 <= args.fit_window <= 10:  # NaN fails too
        raise UserError(f"--fit-window: must be between 0.5 and 10 octaves, got "
                        f"{args.fit_window:g}")
    from mutransfer.analysis import analysis_dir
    from mutransfer.commands.outputs import check_output_dir
    from mutransfer.results.fs import absolute_location

    absolute_location(args.results_dir)  # a symlink loop, a name too long: one line
    if Path(args.results_dir).is_file():  # named as such, not as the --out it would imply
        raise UserError(f"{args.results_dir}: a file, not a results folder")
    # before the analysis; --out '' refused as written, not read as no --out
    check_output_dir(args.out if args.out is not None else analysis_dir(args.results_dir))
    if args.out:
        _outside_the_tables(args.results_dir, args.out)
    return analyze(args.results_dir, fit_window=args.fit_window,
                   target=getattr(args, "target", None), scale=getattr(args, "scale", None))


def _outside_the_tables(results_dir: str, out: str) -> None:
    """Refuse an --out inside the store's own tables: every Parquet file in trials/, steps/
    or running/ is read as rows of the sweep, so the analysis's tables written there would be
    skipped with a warning at every later read."""
    from mutransfer.results.fs import is_uri
    from mutransfer.results.store import Store

    if is_uri(results_dir) or is_uri(out):
        return
    store = Store(results_dir)
    target = Path(out).resolve()
    for folder in (store.trials_dir, store.steps_dir, store.running_dir):
        if target.is_relative_to(Path(folder).resolve()):
            raise UserError(f"--out {out}: inside the results folder's "
                            f"{Path(folder).name}/, whose Parquet files are read as the "
                            f"sweep's rows; give a folder outside it")


def run(args) -> int:
    from mutransfer.analysis import analysis_dir, full_text, write_analysis

    a = analysis_from_args(args)
    print(full_text(a))
    out = Path(args.out) if args.out else analysis_dir(args.results_dir)
    paths = write_analysis(a, out)
    print(f"\nwrote {len(paths)} files to {out}/ (tables as .parquet and .csv, analysis.md)")
    return 0
