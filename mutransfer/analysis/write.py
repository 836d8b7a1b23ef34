"""The analysis on disk: every table as Parquet and CSV with analysis.md, and the PNG figures
with one self-contained report.html (figures embedded as base64 data URIs).

The report opens from disk with no server and keeps working when moved or mailed: it links
nothing, loads nothing, and runs no script.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mutransfer.analysis.coordverdict import AXES
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.intervals import INTERVAL_SOURCE
from mutransfer.analysis.render import Figure, markdown, render_html

REPORT = "report.html"
# every figure make_figures may draw: one it does not draw this time is removed, as an empty
# table's files are (write_table), so the folder never holds a figure of an earlier analysis
FIGURES = ("loss_vs_lr.png", "lr_opt_vs_width.png", "stability_vs_width.png",
           "optimum_vs_scale.png", "law.png", "training_curves.png", "coord_check.png")


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _parquet_safe(df: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding several Python types (an axis of numbers and "unset") become text,
    which Parquet can store; uniform columns keep their type. A missing value stays missing (a
    Parquet null, an empty CSV field), not the text "nan" or "None"."""
    out = df.copy()
    for col in out.columns:
        if not pd.api.types.is_object_dtype(out[col].dtype):
            continue
        kinds = {type(v) for v in out[col] if not _missing(v)}
        if len(kinds) > 1:
            out[col] = out[col].map(lambda v: None if _missing(v) else str(v)).astype(object)
    return out


def _small_strings(table: pa.Table) -> pa.Table:
    """Text columns as Arrow `string` (docs/results-format.md), as the trials and steps
    tables store it: pandas 3 hands its text to Arrow as `large_string`, older pandas as
    `string`, and a reader's schema should not depend on the pandas that wrote the table."""
    fields = [pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
              for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def write_table(df: pd.DataFrame, stem: Path) -> list[Path]:
    """`stem`.parquet and `stem`.csv (an empty table removes stale copies instead)."""
    paths = [stem.with_suffix(".parquet"), stem.with_suffix(".csv")]
    if df.empty:
        for p in paths:
            p.unlink(missing_ok=True)
        return []
    safe = _parquet_safe(df)
    pq.write_table(_small_strings(pa.Table.from_pandas(safe, preserve_index=False)), paths[0])
    safe.to_csv(paths[1], index=False)
    return paths


def write_analysis(analysis: Analysis, out_dir: str | Path) -> list[Path]:
    """Every table as Parquet and CSV, plus analysis.md, under `out_dir`; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for stem, df in analysis.stored_tables().items():
        paths += write_table(df, out / stem)
    md = out / "analysis.md"
    md.write_text(markdown(analysis))
    return [*paths, md]


def make_figures(a: Analysis, out: Path) -> dict[str, Figure]:
    """Every figure the folder supports, keyed by the table section it goes with."""
    # matplotlib is imported here, not at the top: the tables and analysis.md need none of it
    from mutransfer.analysis.coordplot import coord_axis, plot_coord_check, read_coord
    from mutransfer.analysis.curves import plot_training_curves
    from mutransfer.analysis.plots import plot_loss_vs_lr, plot_lr_opt, plot_stability

    figs: dict[str, Figure] = {
        "loss_vs_lr": Figure(plot_loss_vs_lr(a, out / "loss_vs_lr.png"),
                             "Loss against LR" if a.choice.target == "lr"
                             else f"Loss against {a.choice.target}",
                             "Seed-adjusted mean final eval loss at each LR, a line per width "
                             "through the LRs where every seed trained. Stars: fitted lr* "
                             "(hollow when on the grid edge); dashed: the curve it was fitted to, "
                             "drawn between the outermost LRs that trained at that width; "
                             "hollow diamonds: some seeds "
                             "diverged (mean of the others; not fitted). In the strip above the "
                             "dotted line, a row per width: x, every seed diverged; "
                             "triangles, trained but above the y range. In the strip below: "
                             "ticks, LRs the family ran at another width but not at this "
                             "one; hollow down-triangles, stopped early (search.stop)."),
    }
    # the target and the scale axis in the width role by the names the tables give them
    # (a report of --target param.overrides.ssm_B.lr_mult --scale model.n_layer said "LR", "width")
    opt, width = a.choice.opt_label, a.scale_name("width")
    title = "Optimal LR against width" if a.choice.is_default else f"{opt} against {width}"
    if np.isfinite(a.lr_opt["lr_opt"]).any():  # else no point to draw (e.g. all diverged)
        figs["drift"] = Figure(
            plot_lr_opt(a, out / "lr_opt_vs_width.png"), title,
            f"{opt} per {width} with its 95% interval ({INTERVAL_SOURCE} pooled over the "
            f"{width} values, or the fit's residuals with one seed; hollow square: no interval, "
            f"hollow circle: on the grid edge, a bound); dashed: least-squares fit of log2 "
            f"{opt} on log2 {width}, slope and its interval in the legend.")
    figs["stability"] = Figure(
        plot_stability(a, out / "stability_vs_width.png"), "Stability boundary against width",
        "Bars span the largest LR where every seed trained to the smallest where any seed "
        "diverged; dots are their geometric mean (the onset); x: the smallest LR where every "
        "seed diverged.")
    if not a.choice.is_default:
        figs.update(scale_figures(a, out))
        if not a.choice.log:  # the LR-scaled figures do not fit a linear target
            figs.pop("drift", None)
            figs.pop("stability", None)
    curves = plot_training_curves(a, a.prepared, a.steps, out / "training_curves.png")
    if curves is not None:
        figs["curves"] = Figure(curves, "Training curves",
                                "Eval loss against step for every cell, mean over seeds; "
                                "colour is the LR.")
    coord = read_coord(a.results_dir)
    if coord is not None:
        axis = coord_axis(coord)
        figs["coord"] = Figure(plot_coord_check(coord, out / "coord_check.png", axis),
                               "Coordinate check",
                               "RMS size of each activation (top) and of its change since "
                               f"initialisation (bottom) against {AXES[axis]}, log-log.")
    return figs


def scale_figures(a: Analysis, out: Path) -> dict[str, Figure]:
    """The optimum against each scale axis, and the law's predictions against the optima."""
    # matplotlib: imported here, not at the top, as in make_figures
    from mutransfer.analysis.scaleplots import plot_law, plot_scale_optima

    c = a.choice
    figs = {"scale_drift": Figure(
        plot_scale_optima(a, out / "optimum_vs_scale.png"),
        f"Optimum of {c.target} against each scale axis",
        f"{c.opt_label} at each point of the scale axes with its 95% interval, a panel per "
        "scale axis and a line per family and value of the other scale axes (hollow: on the "
        "grid edge, a bound); the legend gives each line's drift per doubling.")}
    law = plot_law(a, out / "law.png")
    if law is not None:
        figs["law"] = Figure(law, "The law against the measured optima",
                             "Each optimum (bars: +-1.96 s.e.) against the law's prediction "
                             "at its scale point; on the dashed diagonal the law is exact. "
                             "The legend gives the exponents b_i.")
    return figs


def write_report(a: Analysis, out: Path) -> list[Path]:
    """Write the figures and report.html under `out`; returns the PNG paths, then the report."""
    out.mkdir(parents=True, exist_ok=True)
    figs = make_figures(a, out)
    drawn = {f.path.name for f in figs.values()}
    for name in FIGURES:
        if name not in drawn:
            (out / name).unlink(missing_ok=True)
    report = out / REPORT
    report.write_text(render_html(a, figs), encoding="utf-8")
    return [f.path for f in figs.values()] + [report]
