"""Training curves per cell: eval loss against step, a panel per family x width, a line per LR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from mutransfer.analysis.cells import DIVERGED, PARTIAL, TRAINED
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.groups import Prepared, as_key, axis_values, family_label
from mutransfer.analysis.plotstyle import (
    colormap,
    fit_suptitle,
    pad_limits,
    save,
    subplots,
)

LINE_STYLE = {TRAINED: "-", PARTIAL: ":", DIVERGED: "--"}
TITLE_CHARS = 36  # characters of a panel title's line that fit a panel at 8 points


def cell_curves(prep: Prepared, cells: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Mean eval loss over seeds per (family, width, lr, step), with the cell's status.

    A cell where every seed diverged is drawn from its diverged seeds (dashed); a partially
    diverged one from the seeds that trained (dotted, so it is not taken for a trained cell);
    a trained one from all its seeds. Falls back to train loss when no eval loss was stored.
    """
    keys = [*prep.group_cols, "lr"]
    loss_col = "eval_loss" if steps["eval_loss"].notna().any() else "train_loss"
    s = steps[["trial_id", "step", loss_col]].rename(columns={loss_col: "loss"})
    s = s[np.isfinite(s["loss"].astype(float))]
    trials = prep.trials[[*keys, "trial_id", "diverged"]].merge(cells[[*keys, "status"]],
                                                               on=keys)
    trials = trials[trials["diverged"] == trials["status"].eq(DIVERGED)]
    df = s.merge(trials, on="trial_id", how="inner")
    out = df.groupby([*keys, "step"], dropna=False, sort=True).agg(
        loss=("loss", "mean"), status=("status", "first")).reset_index()
    out.attrs["loss_col"] = loss_col
    return out


def curve_limits(curves: pd.DataFrame) -> tuple[float, float]:
    """Trained cells' range up to their 90th percentile: the early drop is clipped so the
    differences between LRs near the end stay visible."""
    v = curves.loc[curves["status"].eq(TRAINED), "loss"].to_numpy()
    if not len(v):
        v = curves["loss"].to_numpy()
    return pad_limits(float(v.min()), float(np.quantile(v, 0.9)), 0.04)


def plot_training_curves(a: Analysis, prep: Prepared, steps: pd.DataFrame,
                         path: Path) -> Path | None:
    """None when the steps table is empty (nothing to draw)."""
    if steps.empty:
        return None
    curves = cell_curves(prep, a.cells, steps)
    if curves.empty:
        return None
    fams = [as_key(k) for k, _ in curves.groupby(a.family_cols, sort=True, dropna=False)]
    widths = sorted(curves["width"].unique())
    log2_lrs = a.choice.coord(curves["lr"].to_numpy())
    norm = Normalize(log2_lrs.min(), log2_lrs.max() if np.ptp(log2_lrs) else log2_lrs.min() + 1)
    cmap = colormap("plasma")
    lo, hi = curve_limits(curves)
    # one line per axis (a `param` axis: per entry that differs): long names fit
    among = axis_values(a.cells, a.axes)
    titles = {fam: family_label(fam, a.axes, sep="\n", among=among) for fam in fams}
    title_lines = 1 + max(t.count("\n") + 1 for t in titles.values())  # and the width
    longest = max(len(line) for t in titles.values() for line in t.split("\n"))
    title_size = min(8.0, 8.0 * TITLE_CHARS / longest)  # a long entry would reach the next
    fig, axes = subplots(len(fams), len(widths), squeeze=False, sharex=True, sharey=True,
                             figsize=(2.6 * len(widths) + 1.2,
                                      (1.9 + 0.15 * title_lines) * len(fams) + 0.8),
                             layout="constrained")
    by_cell = curves.groupby([*a.family_cols, "width"], dropna=False)
    for i, fam in enumerate(fams):
        for j, w in enumerate(widths):
            ax = axes[i, j]
            key = (*fam, w)
            if key in by_cell.groups:
                for lr, c in by_cell.get_group(key).groupby("lr"):
                    ax.plot(c["step"], np.minimum(c["loss"], hi), lw=1.0,
                            ls=LINE_STYLE[c["status"].iloc[0]],
                            color=cmap(norm(a.choice.coord(np.array([lr]))[0])))
            ax.set_ylim(lo, hi)
            title = titles[fam]
            wname = a.scale_name("width")
            ax.set_title(f"{title}\n{wname} {w}" if a.axes else f"{title}, {wname} {w}",
                         fontsize=title_size)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if i == len(fams) - 1:
                ax.set_xlabel("step", fontsize=8)
            if j == 0:
                ax.set_ylabel(curves.attrs["loss_col"].replace("_", " "), fontsize=8)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8,
                       pad=0.02)
    bar.set_label("learning rate (log2)" if a.choice.target == "lr" else
                  f"{a.choice.target_label}" + (" (log2)" if a.choice.log else ""))
    fit_suptitle(fig, ["Training curves (mean over seeds)", line_key(set(curves["status"]))])
    return save(fig, path)


def line_key(statuses: set[str]) -> str:
    """What the line styles drawn mean: only those of `statuses` (a key of every style named
    dotted lines on a store where no seed diverged, and sent a reader looking for them)."""
    keys = {PARTIAL: "dotted: some seeds diverged (mean of the rest)",
            DIVERGED: "dashed: all diverged"}
    return "; ".join([keys[s] for s in (PARTIAL, DIVERGED) if s in statuses]
                     + ["clipped at the top"])
