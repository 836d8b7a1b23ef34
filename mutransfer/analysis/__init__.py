"""Transfer analysis of a results folder: optimal LR, drift, stability, regret, plots, report.

Reads only the Parquet tables (docs/results-format.md). The public API, used by the `analyze`
and `plot` commands and by the sweep at its end:

    analyze(results_dir) -> Analysis
    write_analysis(analysis, out_dir) -> list[Path]
    summary_table(analysis) -> str      (full_text: every table, as `analyze` prints it)
    make_plots(results_dir) -> list[Path]

Computing: core (analyze) over groups, cells, fit, intervals, optimum, drift, stability,
regret (with slopes and tdist). Showing: views (tables as strings), render (text, Markdown,
HTML), write (files), plots, curves, coordplot (figures). Judging a coordinate check:
coordverdict.
"""

from __future__ import annotations

from pathlib import Path

from mutransfer.analysis.core import Analysis, analyze
from mutransfer.analysis.render import full_text, summary_table
from mutransfer.analysis.write import write_analysis, write_report
from mutransfer.errors import UserError
from mutransfer.results.fs import local_folder

__all__ = ["Analysis", "analyze", "write_analysis", "summary_table", "full_text", "make_plots",
           "analysis_dir"]


def analysis_dir(results_dir: str | Path) -> Path:
    """Where the analysis of a results folder is written: RESULTS_DIR/analysis, local only
    (a plain path or a file:// URI: a folder of this machine's filesystem)."""
    folder = local_folder(str(results_dir))
    if folder is None:
        raise UserError(f"{results_dir} is not a local folder: give an output folder (--out) "
                        "for the analysis files")
    return Path(folder) / "analysis"


def make_plots(results_dir: str | Path, analysis: Analysis | None = None,
               out_dir: str | Path | None = None) -> list[Path]:
    """PNG figures and a self-contained report.html under RESULTS_DIR/analysis/.

    Pass `analysis` to reuse one already computed (the bootstrap is the slow part).
    Matplotlib is imported only here, so `analyze` stays light.
    """
    a = analysis if analysis is not None else analyze(results_dir)
    return write_report(a, Path(out_dir) if out_dir is not None else analysis_dir(results_dir))
