"""Figures of a chosen target and scale axes: the optimum against each scale axis, and the
law's predictions against the measured optima (analysis/choice.py, law.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.lines import Line2D

from mutransfer.analysis.core import Analysis
from mutransfer.analysis.drift import BOUND_WORDS
from mutransfer.analysis.groups import as_key
from mutransfer.analysis.plots import family_text, value_text
from mutransfer.analysis.plotstyle import (
    dodge,
    family_colors,
    log2_axis,
    place_legend,
    save,
    subplots,
)


def _scale_axis(ax, values: np.ndarray, name: str) -> None:
    """log2 x axis labelled with the scale axis's own values."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    values = np.unique(values)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(values.min() * 2**-0.4, values.max() * 2**0.4)
    ax.set_xlabel(f"{name} (log2 scale)")


def _line_label(a: Analysis, key: tuple, cols: list[str]) -> str:
    """The family and the other scale axes' values; a JSON object's value (a `param` axis)
    by the entries that differ between the families only."""
    parts = [str(key[0])] + [f"{a.scale_name(c)}={v}" if c in a.prepared.scale_cols
                             else value_text(a, c, v) for c, v in zip(cols[1:], key[1:])]
    return ", ".join(parts)


def _panel(a: Analysis, ax, scale_col: str) -> None:
    c = a.choice
    opt = a.lr_opt
    cols = [col for col in a.group_cols if col != scale_col]
    drift = a.scale_drift[a.scale_drift["scale"] == a.scale_name(scale_col)]
    groups = list(opt.groupby(cols, sort=True, dropna=False))
    colors = family_colors([str(as_key(k)) for k, _ in groups])
    for i, (k, rows) in enumerate(groups):
        key = as_key(k)
        rows = rows[np.isfinite(rows["lr_opt"])].sort_values(scale_col)
        col = colors[str(key)]
        # lines side by side at each point, so that their bars do not hide one another
        x = rows[scale_col].to_numpy(float) * dodge(i, len(groups))
        y = rows["lr_opt"].to_numpy(float)
        lo = rows["ci_low"].fillna(rows["lr_opt"]).to_numpy(float)
        hi = rows["ci_high"].fillna(rows["lr_opt"]).to_numpy(float)
        d = drift
        for cname, v in zip(cols, key):
            d = d[d[cname] == v] if cname in d else d
        slope = float(d["slope"].iloc[0]) if len(d) else np.nan
        text = _line_label(a, key, cols)
        if np.isfinite(slope):
            bound = str(d["edge_bound"].iloc[0]) if len(d) and "edge_bound" in d else ""
            text += f": {slope:+.2f}/doubling" + BOUND_WORDS.get(bound, "")
        ax.errorbar(x, y, yerr=np.clip(np.vstack([y - lo, hi - y]), 0, None), fmt="-",
                    color=col, capsize=3, lw=1.2, label=text)
        edge = rows["edge"].to_numpy(bool)
        bare = ~edge & ~np.isfinite(rows["ci_low"].to_numpy(float))
        sure = ~edge & ~bare
        ax.plot(x[sure], y[sure], "o", color=col, ms=6)
        ax.plot(x[bare], y[bare], "s", mfc="white", mec=col, ms=6)
        ax.plot(x[edge], y[edge], "o", mfc="white", mec=col, ms=6)
    _scale_axis(ax, opt[scale_col].to_numpy(float), a.scale_name(scale_col))
    if not np.isfinite(opt["lr_opt"].to_numpy(float)).any():
        # nothing to draw (every cell diverged: no optimum anywhere): a log2 y axis
        # without a point made matplotlib raise, and the sweep lost every figure and the report
        ax.text(0.5, 0.5, "no optimum at any point\n(see the stability plot and the notes)",
                transform=ax.transAxes, ha="center", va="center", fontsize=9)
        ax.set_yticks([])
    elif c.log:
        log2_axis(ax, "y", np.concatenate([opt["ci_low"], opt["ci_high"], opt["lr_opt"]]))
    ax.set_ylabel(f"{c.opt_label}" + (" (log2 scale)" if c.log and ax.get_yscale() == "log"
                                      else ""))
    ax.set_title(f"optimum of {c.target_label} against {a.scale_name(scale_col)}")
    ax.grid(alpha=0.3)
    place_legend(ax, ax.get_legend_handles_labels()[0], fontsize=7,
                 title="bars: 95% interval; hollow circle: on the grid edge (a bound);\n"
                 "hollow square: no interval", title_fontsize=7)


def plot_scale_optima(a: Analysis, path: Path) -> Path:
    """A panel per scale axis: the optimum against that axis, a line per family and value of
    the other scale axes, with the intervals; the legend gives each line's drift."""
    scale_cols = a.prepared.scale_cols
    fig, axes = subplots(1, len(scale_cols), figsize=(6.4 * len(scale_cols), 4.8),
                             squeeze=False, layout="constrained")
    for ax, scale_col in zip(axes[0], scale_cols):
        _panel(a, ax, scale_col)
    fig.suptitle(f"Optimum of {a.choice.target} per point of the scale axes")
    return save(fig, path)


def plot_law(a: Analysis, path: Path) -> Path | None:
    """Measured optima against the law's predictions, a colour per family; the diagonal is a
    perfect law. None without a fitted law."""
    pts = a.law.points
    if pts.empty or not np.isfinite(pts["log2_law"]).any():
        return None
    c = a.choice
    pool = a.prepared.pool_cols
    fig, ax = subplots(figsize=(6.0, 5.4), layout="constrained")
    fams = list(pts.groupby(pool, sort=True, dropna=False))
    colors = family_colors([str(as_key(k)) for k, _ in fams])
    coef = a.law.coef
    for k, rows in fams:
        key = as_key(k)
        est = coef
        for cname, v in zip(pool, key):
            est = est[est[cname] == v]
        terms = ", ".join(f"b_{t} {e:+.2f}" for t, e in zip(est["term"], est["estimate"])
                          if t != "intercept" and np.isfinite(e))
        label = family_text(a, key, pool[1:]) + (f": {terms}" if terms else "")
        ax.errorbar(rows["log2_law"], rows["log2_opt"], yerr=1.96 * rows["se_log2"].fillna(0),
                    fmt="o", color=colors[str(key)], capsize=3, ms=5, label=label)
    allv = np.concatenate([pts["log2_law"], pts["log2_opt"]])
    allv = allv[np.isfinite(allv)]
    lo, hi = allv.min(), allv.max()
    pad = 0.1 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "--", color="grey", lw=1)
    unit = f"log2 {c.opt_label}" if c.log else c.opt_label
    ax.set_xlabel(f"law's prediction ({unit})")
    ax.set_ylabel(f"measured ({unit})")
    ax.set_title(f"{unit} = a + sum_i b_i log2(scale_i), scale: {', '.join(c.scale)}",
                 fontsize=9)
    ax.grid(alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], ls="--", color="grey", label="measured = law"))
    ax.legend(handles=handles, fontsize=7, title="bars: +-1.96 s.e.", title_fontsize=7)
    return save(fig, path)
