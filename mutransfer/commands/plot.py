"""`mutransfer plot RESULTS_DIR`: transfer figures (PNG) and a self-contained report.html."""

from __future__ import annotations


def add_arguments(p, name: str) -> None:
    from mutransfer.commands.analyze import add_analysis_options

    add_analysis_options(p)


def run(args) -> int:
    from mutransfer.analysis import make_plots
    from mutransfer.analysis.core import NOTHING_TRAINED
    from mutransfer.commands.analyze import analysis_from_args

    a, out = analysis_from_args(args)
    if a.nothing_trained:  # a normal first sweep with too high an LR range: say so first
        # that note, not the first (an unfinished sweep's, two sweeps' come before it)
        head = NOTHING_TRAINED.split(":")[0]
        print(f"note: {next((n for n in a.notes if n.startswith(head)), head)}")
    for path in make_plots(args.results_dir, analysis=a, out_dir=out):
        print(path)
    return 0
