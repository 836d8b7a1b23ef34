"""The table printed at the end of a sweep: the analysis summary when it is available,
otherwise (or with --no-analysis) the best LR per width and parameterization from the
trials table."""

from __future__ import annotations

from typing import TextIO

import pandas as pd

from mutransfer.errors import UserError
from mutransfer.results.fs import is_uri
from mutransfer.results.store import DONE_STATUSES, Store, Tables


def print_summary(store: Store, out: TextIO, analysis: bool = True) -> None:
    tables = store.tables()
    trials = tables.trials
    done = trials[trials["status"].isin(DONE_STATUSES)] if len(trials) else trials
    if not len(done):
        print("no finished trials yet", file=out)
        return
    if analysis and _analysis_summary(store, tables, out):
        return
    print(best_lr_table(done), file=out)


def _analysis_summary(store: Store, tables: Tables, out: TextIO) -> bool:
    """The analysis module's summary and plots; False when it is not there or cannot run."""
    try:
        from mutransfer.analysis import analyze, summary_table
    except ImportError:
        return False
    try:
        result = analyze(store.location, tables=tables)
        print(summary_table(result), file=out)
    except UserError as exc:  # e.g. one width only: says what is missing
        print(f"analysis: {exc}", file=out)
        return False
    except Exception as exc:  # the sweep's results are stored; a failing summary must not hide it
        print(f"analysis failed ({type(exc).__name__}: {exc}); best LRs from the trials "
              f"table instead:", file=out)
        return False
    _plots(store, result, out)
    return True


def _plots(store: Store, result: object, out: TextIO) -> None:
    try:
        from mutransfer.analysis import make_plots
    except ImportError:
        return
    if is_uri(store.location):
        print("plots: run `mutransfer plot` on a local copy of the results", file=out)
        return
    try:
        paths = make_plots(store.location, analysis=result)
    except Exception as exc:
        print(f"plots failed ({type(exc).__name__}: {exc})", file=out)
        return
    if paths:
        folder = str(paths[0]).rsplit("/", 1)[0]
        print(f"plots and report: {folder}/ ({len(paths)} files)", file=out)


def best_lr_table(trials: pd.DataFrame) -> str:
    """Per parameterization and width: the LR with the lowest mean final eval loss over seeds
    (diverged trials excluded), and how many LRs were tried and diverged."""
    df = trials.copy()
    df["lr"] = df["lr"].astype(float)
    df["loss"] = pd.to_numeric(df["final_eval_loss"], errors="coerce").where(
        ~df["diverged"].astype(bool))
    rows = []
    for (param, width), g in df.groupby(["parameterization", "width"], sort=True):
        by_lr = g.groupby("lr")["loss"].mean()
        finite = by_lr.dropna()
        best = finite.idxmin() if len(finite) else None
        rows.append({"parameterization": param, "width": int(width),
                     "best lr": f"{best:.3g}" if best is not None else "-",
                     "loss": f"{finite.min():.4f}" if len(finite) else "-",
                     "edge": "yes" if best is not None and best in (by_lr.index.min(),
                                                                     by_lr.index.max()) else "",
                     "lrs": len(by_lr), "diverged": int(g["diverged"].astype(bool).sum())})
    return "best LR per width (mean final eval loss over seeds):\n" + \
        pd.DataFrame(rows).to_string(index=False)
