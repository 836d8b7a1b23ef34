"""The coordinate-check figure: RMS of each activation h and of its change Δh against width.

Reads RESULTS_DIR/coord_check/coord.parquet (docs/results-format.md). Values are taken at the
last recorded step, geometric means over seeds and layers (model-level quantities have layer
-1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
from matplotlib.lines import Line2D

from mutransfer.analysis.plotstyle import colormap, save, subplots, width_axis
from mutransfer.results.fs import join
from mutransfer.results.store import Store

COORD_FILE = "coord_check/coord.parquet"
# a marker and a dash per activation besides its colour: lines of equal size (conv and
# ssm_out in a Mamba block) lie on one another, and tab20's paired colours look alike
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "<", ">", "h", "*"]
DASHES = ["-", "--", "-.", ":"]


def quantity_styles(quantities: list[str]) -> dict[str, dict]:
    """Colour, marker and line style per activation, no two alike; past ten, tab20's dark
    shades first and then its light ones (in its own order a light shade followed its dark
    one: block_out and conv in one orange)."""
    cmap = colormap("tab20")
    return {q: {"color": cmap((2 * i) % 20 + (2 * i // 20) % 2),
                "marker": MARKERS[i % len(MARKERS)],
                "ls": DASHES[(i // len(MARKERS)) % len(DASHES)]}
            for i, q in enumerate(quantities)}


def read_coord(results_dir: str | Path) -> pd.DataFrame | None:
    """The coordinate-check table of a results folder (local or URI), None when absent."""
    store = Store(results_dir)
    path = join(store.root, COORD_FILE)
    if store.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    df = store.read_part(path)
    return df if len(df) else None


def coord_axis(df: pd.DataFrame) -> str:
    """`n_layer` for a depth check's table (one width, several depths), else `width`."""
    if "n_layer" in df and df["width"].nunique() == 1 and df["n_layer"].nunique() > 1:
        return "n_layer"
    return "width"


def coord_summary(df: pd.DataFrame, axis: str = "width") -> pd.DataFrame:
    """Geometric-mean rms and drms per (parameterization, optimizer, `axis` value, quantity)
    at the last step, over seeds and layers (the mean the verdict's slopes are taken of)."""
    last = df[df["step"] == df["step"].max()]
    keys = ["parameterization", "optimizer", axis, "quantity"]
    with np.errstate(divide="ignore"):
        logs = last.assign(rms=np.log(last["rms"]), drms=np.log(last["drms"]))
    out = logs.groupby(keys, sort=True).agg(rms=("rms", "mean"), drms=("drms", "mean"),
                                            n_seeds=("seed", "nunique")).reset_index()
    return out.assign(rms=np.exp(out["rms"]), drms=np.exp(out["drms"]))


def plot_coord_check(df: pd.DataFrame, path: Path, axis: str = "width") -> Path:
    """RMS of h and Δh against `axis` (width, or n_layer for a depth check), a panel per
    parameterization."""
    summ = coord_summary(df, axis)
    step = int(df["step"].max())
    panels = list(summ.groupby(["parameterization", "optimizer"], sort=True))
    show_opt = summ["optimizer"].nunique() > 1
    quantities = sorted(summ["quantity"].unique())
    styles = quantity_styles(quantities)
    widths = sorted(int(w) for w in summ[axis].unique())
    fig, axes = subplots(2, len(panels), squeeze=False, sharex=True,
                             figsize=(3.6 * len(panels) + 2.0, 6.4))
    for j, ((param, opt), rows) in enumerate(panels):
        for i, (col, what) in enumerate([("rms", "RMS of h"), ("drms", "RMS of Δh")]):
            ax = axes[i, j]
            for q, r in rows.groupby("quantity"):
                r = r.sort_values(axis)
                v = r[col].to_numpy(float)
                keep = np.isfinite(v) & (v > 0)  # Δh is 0 at step 0: nothing to draw on a log axis
                ax.plot(r[axis][keep], v[keep], ms=4, lw=1.2, mfc="none", **styles[q])
            ax.set_yscale("log")
            width_axis(ax, widths)
            if axis == "n_layer":
                ax.set_xlabel("depth (n_layer, log2 scale)")
            if i == 0:  # the panels share the x axis: labelled once, at the bottom
                ax.set_xlabel("")
            ax.set_title(f"{param}" + (f" ({opt})" if show_opt else "") + f": {what}",
                         fontsize=9)
            ax.set_ylabel(what if j == 0 else "")
            ax.grid(alpha=0.3, which="both")
    handles = [Line2D([], [], ms=4, mfc="none", label=q, **styles[q]) for q in quantities]
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False,
               title="activation", fontsize=8)
    what = "depth" if axis == "n_layer" else "width"
    fig.suptitle(f"Coordinate check at step {step}\nflat lines mean {what}-independent sizes "
                 "(geometric mean over seeds and layers)", fontsize=10)
    fig.tight_layout()
    return save(fig, path)
