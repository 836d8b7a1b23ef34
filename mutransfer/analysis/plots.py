"""Transfer figures from the analysis tables: loss against LR, lr* and stability against width."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from mutransfer.analysis.cells import DIVERGED, NOT_RUN, PARTIAL, TRAINED
from mutransfer.analysis.choice import Choice
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.drift import BOUND_WORDS
from mutransfer.analysis.fit import grid_window
from mutransfer.analysis.groups import as_key, axis_text, axis_values, family_label
from mutransfer.analysis.intervals import FIT, INTERVAL_SOURCE, POINTS, SEEDS
from mutransfer.analysis.plotstyle import (
    dodge,
    family_colors,
    log2_axis,
    pad_limits,
    place_legend,
    save,
    subplots,
    width_axis,
    width_colors,
)

DEFAULT = Choice()
STOPPED = "stopped"  # drawn apart: a cell left out because a trial there stopped early
ROW = 0.03  # a width's row in the strips above and below the data, as a fraction of its range


def value_text(a: Analysis, col: str, value: object, sep: str = ", ") -> str:
    """`axis=value` as the figures show it: of a JSON object's value (a `param` axis), only
    the entries that differ between the families (groups.compact_values)."""
    return axis_text(col, value, list(a.cells[col].unique()) if col in a.cells else None, sep)


def family_text(a: Analysis, key: tuple, cols: list[str], sep: str = ", ") -> str:
    """The parameterization, then `axis=value` for each of `cols` (the key's other parts),
    compacted among the store's values as the printed tables are (groups.family_label)."""
    return family_label(key, cols, sep, axis_values(a.cells, cols))


def families(a: Analysis, df: pd.DataFrame, sep: str = ", ") -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per family of `df`, in sorted order; `sep` joins the label's parts."""
    return [(family_text(a, as_key(k), a.axes, sep), rows)
            for k, rows in df.groupby(a.family_cols, sort=True, dropna=False)]


def loss_limits(cells: pd.DataFrame, optima: pd.DataFrame | None = None) -> tuple[float, float]:
    """y range from the LRs that trained: from the best loss up to 2.5x its distance to the
    median, so the bowls stay readable when a few LRs barely trained (those are drawn clipped).
    `optima` (the lr* table): its fitted losses are kept in range too, since a quadratic's
    vertex between two grid LRs lies below every trained cell. A partially diverged LR's mean
    (its survivors') is kept in range below: near the stability edge it is often the lowest
    loss of its width, and its diamond was clipped off the bottom (the strip above holds those
    that lie above the range)."""
    v = cells.loc[cells["status"].eq(TRAINED), "mean_loss"].to_numpy()
    v = v[np.isfinite(v)]
    if not len(v):
        return 0.0, 1.0
    lo, hi = float(v.min()), float(min(v.max(), v.min() + 2.5 * (np.median(v) - v.min())))
    hi = hi if hi > lo else float(v.max())
    part = cells.loc[cells["status"].eq(PARTIAL), "mean_loss"].to_numpy(float)
    part = part[np.isfinite(part)]
    lo = min(lo, float(part.min())) if len(part) else lo
    if optima is not None and len(optima):
        fitted = optima["loss_at_opt"].to_numpy(dtype=float)
        fitted = fitted[np.isfinite(fitted)]
        if len(fitted):  # every width's star in range, below and above (one LR per width:
            # a width whose bowl sits above the others' had its star pinned to the top)
            lo, hi = min(lo, float(fitted.min())), max(hi, float(fitted.max()))
    return pad_limits(lo, hi, 0.04)


def _grid(n: int, max_cols: int = 3, size: tuple[float, float] = (4.6, 3.6), **kw):
    """n panels, 3 to a row; one alone is drawn larger (its bowls were squeezed beside the
    legend)."""
    size = (6.4, 4.4) if n == 1 else size
    cols = min(n, max_cols)
    rows = math.ceil(n / cols)
    fig, axes = subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows),
                             squeeze=False, layout="constrained", **kw)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat


def _on_edge(ax, x: np.ndarray, y: float, marker: str, **kw) -> bool:
    """Markers in a row of the strip above or below the data (unclipped, like the muP
    papers' marks on the edge); whether any was drawn.

    Skipped when empty: an empty unclipped line still claims a box at the figure's origin
    and makes the layout collapse."""
    if len(x):
        ax.plot(x, np.full(len(x), y), marker, ls="", clip_on=False, zorder=4, **kw)
    return bool(len(x))


def _fitted_curve(ax, o: pd.Series, window: float, top: float, color,
                  trained: np.ndarray) -> bool:
    """The curve lr* was fitted to, dashed, across its window but only between the outermost
    LRs that trained at this width (`trained`): never extrapolated past them (a transfer
    search ran 3-6 LRs at a width, and the curve was drawn across the whole window).
    The window is the fit's own (fit.grid_window: `window` octaves, or five steps of the
    trained LRs' grid where that is wider): on a one-octave grid the curve stopped 2.5
    octaves from lr*, half-way to the points the fit still weighed. Whether any was drawn."""
    trained = np.log2(np.asarray(trained, float))
    if not np.isfinite(o["curvature"]) or not len(trained):
        return False
    window = float(grid_window(np.sort(trained), np.zeros((1, len(trained))), window)[0])
    v = math.log2(o["lr_opt"])
    lo, hi = max(v - window, trained.min()), min(v + window, trained.max())
    if hi <= lo:
        return False
    x = np.linspace(lo, hi, 80)
    y = o["loss_at_opt"] + o["curvature"] * (x - v) ** 2
    keep = y <= top
    ax.plot(2.0 ** x[keep], y[keep], "--", lw=0.9, color=color, alpha=0.8, zorder=2)
    return bool(keep.any())


def _star(ax, o: pd.Series, top: float, color) -> str:
    """lr*: filled in the width's colour, hollow with an edge in that colour on the grid edge.
    The kind of mark drawn (a key of _loss_mark_handles)."""
    edge = bool(o["edge"])
    ax.plot(o["lr_opt"], min(o["loss_at_opt"], top), "*", ms=14, zorder=5,
            mfc="white" if edge else color, mec=color if edge else "black",
            mew=1.6 if edge else 0.8)
    return "edge_star" if edge else "star"


def _statuses(cells: pd.DataFrame) -> np.ndarray:
    """Each cell's status, STOPPED where a trial there stopped early (the estimator sees it
    as not run; the figure draws it apart)."""
    return np.where(cells["stopped"].to_numpy(bool), STOPPED, cells["status"].to_numpy())


def _loss_panel(ax, cells: pd.DataFrame, opt: pd.DataFrame, colors: dict,
                ylim: tuple[float, float], window: float, choice: Choice = DEFAULT) -> set[str]:
    """One family's curves inside `ylim`; the marks off that range go to a row per width in
    strips above it (diverged, above the range) and below it (not run, stopped early), so
    that no width's mark hides another's. The cells a trial stopped early at (search.stop)
    are drawn apart from the LRs not run. Returns the kinds of mark drawn (the keys of
    _loss_mark_handles), so that the legend names only those."""
    bottom, top = ylim
    row = ROW * (top - bottom)
    # a width's row is its place among all the store's widths (`colors` holds them all), so
    # that it is the same row in every panel (a family without the narrowest width moved
    # the others' marks a row down in its panel only)
    rows = {w: i for i, w in enumerate(sorted(colors))}
    marks: set[str] = set()
    for w, c in cells.groupby("width", sort=True):
        i = rows[int(w)]
        c = c.sort_values("lr")
        color = colors[int(w)]
        lr, loss = c["lr"].to_numpy(), c["mean_loss"].to_numpy()
        status = _statuses(c)
        ok = (status == TRAINED) & np.isfinite(loss)
        part = (status == PARTIAL) & np.isfinite(loss)
        up, down = top + (i + 0.5) * row, bottom - (i + 0.5) * row
        ax.plot(lr[ok], np.minimum(loss[ok], top), "-o", ms=3, lw=1.3, color=color)
        # the survivors' mean of a partially diverged LR: drawn apart, never on the line
        hollow = {"mfc": "white", "mec": color, "mew": 1.4}
        inside = part & (loss <= top)
        ax.plot(lr[inside], loss[inside], "D", ms=5, ls="", zorder=4, **hollow)
        drawn = {"partial": _on_edge(ax, lr[part & (loss > top)], up, "D", ms=5, **hollow)
                 or bool(inside.any()),
                 "above": _on_edge(ax, lr[ok & (loss > top)], up, "^", ms=6, color=color),
                 "diverged": _on_edge(ax, lr[status == DIVERGED], up, "x", ms=7, mew=1.8,
                                      color=color),
                 "not_run": _on_edge(ax, lr[status == NOT_RUN], down, "|", ms=5, mew=1.5,
                                     color=color),
                 "stopped": _on_edge(ax, lr[status == STOPPED], down, "v", ms=6, **hollow)}
        marks |= {k for k, v in drawn.items() if v}
        o = opt[opt["width"] == w]
        if len(o) and np.isfinite(o["lr_opt"].iloc[0]):
            # a linear target's curve lives in grid steps: not redrawn
            if choice.log and _fitted_curve(ax, o.iloc[0], window, top, color, lr[ok]):
                marks.add("curve")
            marks.add(_star(ax, o.iloc[0], top, color))
    if choice.log:
        log2_axis(ax, "x", cells["lr"].to_numpy())
    ax.set_xlabel("learning rate (log2 scale)" if choice.target == "lr" else
                  f"{choice.target_label}" + (" (log2 scale)" if choice.log else ""))
    ax.grid(alpha=0.3)
    return marks


def _strips(a: Analysis, lo: float, hi: float) -> tuple[float, float]:
    """The y range with room for a row per width above the data when a mark goes there
    (diverged, above the range) and below it when one goes there (not run, stopped)."""
    c = a.cells
    status = _statuses(c)
    above = (status == DIVERGED) | (np.isin(status, [TRAINED, PARTIAL]) &
                                    (c["mean_loss"].to_numpy(float) > hi))
    below = np.isin(status, [NOT_RUN, STOPPED])
    strip = ROW * len(a.widths) * (hi - lo)
    return lo - strip * below.any(), hi + strip * above.any()


def _data_ticks(ax, lo: float, hi: float) -> None:
    """y ticks inside the data's range only (the strips have no loss scale), with dotted
    lines where the strips begin."""
    ax.set_yticks([t for t in MaxNLocator(6).tick_values(lo, hi) if lo <= t <= hi])
    bottom, top = ax.get_ylim()
    for y, strip in ((lo, bottom < lo), (hi, top > hi)):
        if strip:
            ax.axhline(y, color="0.5", lw=0.7, ls=":", zorder=1)


def plot_loss_vs_lr(a: Analysis, path: Path) -> Path:
    """A panel per family, a line per width through the LRs where every seed trained; stars at
    lr* and the curve it was fitted to (dashed, across its window between the outermost LRs
    that trained at that width), partially diverged LRs as hollow diamonds (mean of the seeds
    that trained); in a strip above the data (a row per width) diverged LRs as x and LRs
    above the y range as triangles, in a strip below it LRs not run at a width as ticks and
    LRs stopped early as hollow down-triangles."""
    fams = families(a, a.cells, sep="\n")  # one line per axis in the titles: long names fit
    opt_by = dict(families(a, a.lr_opt, sep="\n"))
    colors = width_colors(a.widths)
    lo, hi = loss_limits(a.cells, a.lr_opt)
    fig, axes = _grid(len(fams), sharey=True)
    marks: set[str] = set()
    for ax, (label, cells) in zip(axes, fams):
        marks |= _loss_panel(ax, cells, opt_by[label], colors, (lo, hi), a.fit_window, a.choice)
        ax.set_ylim(*_strips(a, lo, hi))
        _data_ticks(ax, lo, hi)
        long = max(len(t) for t in label.split("\n")) > 32
        ax.set_title(label, fontsize=9 if long else None)
    for ax in axes[:: min(len(fams), 3)]:
        ax.set_ylabel("final eval loss (seed-adjusted mean)")
    handles = [Line2D([], [], color=colors[w], marker="o", ms=4,
                      label=f"{a.scale_name('width')} {w}") for w in a.widths]
    handles += _loss_mark_handles(marks, a.scale_name("width"), a.choice.opt_label)
    # one column grew taller than the figure with many widths and ran into the title
    fig.legend(handles=handles, loc="outside right center", frameon=False,
               ncols=1 if len(handles) <= 12 else 2)
    fig.suptitle("Final eval loss against learning rate, by width" if a.choice.is_default
                 else f"Final eval loss against {a.choice.target}, by {a.scale_name('width')}")
    return save(fig, path)


def _loss_mark_handles(marks: set[str], width_name: str,
                       opt_label: str = "lr*") -> list[Line2D]:
    """The legend's entry for each kind of mark drawn, in a fixed order; none for a mark not
    drawn (a newcomer looked for the diamonds and ticks the legend promised). `opt_label`
    names the star: the target's optimum (a weight-decay sweep's star was called lr*)."""
    kinds = {
        "star": dict(marker="*", ms=12, mfc="grey", mec="black", label=f"{opt_label} (fit)"),
        "curve": dict(ls="--", lw=0.9, color="grey", label="fitted curve"),
        "edge_star": dict(marker="*", ms=12, mfc="white", mec="grey", mew=1.6,
                          label=f"{opt_label} on grid edge"),
        "partial": dict(marker="D", ms=5, mfc="white", mec="grey", mew=1.4,
                        label="some seeds diverged\n(mean of the rest; not fitted)"),
        "diverged": dict(marker="x", ms=7, mew=1.8, color="grey",
                         label="every seed diverged (top strip)"),
        "not_run": dict(marker="|", ms=8, mew=1.5, color="grey",
                        label=f"not run at this {width_name}\n(bottom strip)"),
        "above": dict(marker="^", ms=6, color="grey", label="above the y range (top strip)"),
        "stopped": dict(marker="v", ms=6, mfc="white", mec="grey", mew=1.4,
                        label="stopped early (search.stop;\nnot fitted)"),
    }
    return [Line2D([], [], **({"ls": ""} | kw)) for k, kw in kinds.items() if k in marks]


def _x_axis(a: Analysis, ax) -> None:
    """The width axis, or the first scale axis's values when another is chosen."""
    width_axis(ax, a.widths)
    if a.scale_name("width") != "width":
        ax.set_xlabel(f"{a.scale_name('width')} (log2 scale)")


def _fit_line(ax, widths: np.ndarray, slope: float, intercept: float, shift: float = 1.0,
              **kw) -> None:
    """The fit across the widths, drawn `shift` times to the right as its points are."""
    if np.isfinite(slope) and len(widths):
        x = np.log2(np.array([widths.min(), widths.max()], float))
        ax.plot(shift * 2.0**x, 2.0 ** (intercept + slope * x), "--", lw=1.2, **kw)


def _interval_text(lo: float, hi: float) -> str:
    return f" [{lo:+.2f}, {hi:+.2f}]" if np.isfinite(lo) and np.isfinite(hi) else ""


def plot_lr_opt(a: Analysis, path: Path) -> Path:
    """lr* against width per family, with their intervals and the fitted drift lines."""
    fig, ax = subplots(figsize=(6.4, 4.6))
    fams = families(a, a.lr_opt)
    colors = family_colors([lab for lab, _ in fams])
    drift_by = dict(families(a, a.drift))
    for i, (label, opt) in enumerate(fams):
        missing = sorted(int(w) for w in opt.loc[~np.isfinite(opt["lr_opt"]), "width"])
        opt = opt[np.isfinite(opt["lr_opt"])].sort_values("width")
        col = colors[label]
        shift = dodge(i, len(fams))  # families' bars at one width side by side, not stacked
        w = opt["width"].to_numpy(float) * shift
        d = drift_by[label].iloc[0]
        text = (f"{label}: slope {d['slope']:+.2f}{_interval_text(d['ci_low'], d['ci_high'])}"
                + BOUND_WORDS.get(str(d.get("edge_bound", "")), "")
                if np.isfinite(d["slope"]) else label)
        if missing:  # say so: a width left out of the figure silently read as never run
            text += (f"\n  no lr* at {a.scale_name('width')} "
                     f"{', '.join(map(str, missing))} (see the lr* table)")
        y = opt["lr_opt"].to_numpy()
        err = np.vstack([y - opt["ci_low"].fillna(opt["lr_opt"]).to_numpy(),
                         opt["ci_high"].fillna(opt["lr_opt"]).to_numpy() - y])
        ax.errorbar(w, y, yerr=np.clip(err, 0, None), fmt="none", ecolor=col, capsize=3, lw=1)
        edge = opt["edge"].to_numpy(bool)
        bare = ~edge & ~np.isfinite(opt["ci_low"]).to_numpy()  # no interval: not a sure point
        ax.plot(w[~edge & ~bare], y[~edge & ~bare], "o", color=col, ms=6, label=text)
        ax.plot(w[bare], y[bare], "s", mfc="white", mec=col, ms=6)
        ax.plot(w[edge], y[edge], "o", mfc="white", mec=col, ms=6)
        _fit_line(ax, opt["width"].to_numpy(), d["slope"], d["intercept"], shift, color=col)
    _x_axis(a, ax)
    log2_axis(ax, "y", np.concatenate([a.lr_opt["ci_low"], a.lr_opt["ci_high"],
                                       a.lr_opt["lr_opt"]]))
    if a.choice.is_default:
        ax.set_ylabel("optimal learning rate lr* (log2 scale)")
        ax.set_title("Optimal LR against width (slope 0 = transfer)")
    else:
        ax.set_ylabel(f"{a.choice.opt_label} (log2 scale)")
        ax.set_title(f"Optimum of {a.choice.target_label} against {a.scale_name('width')} "
                     "(slope 0 = transfer)")
    ax.grid(alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    drawn = np.isfinite(a.lr_opt["lr_opt"].to_numpy(float))  # a width without lr* has no mark
    if (drawn & ~a.lr_opt["edge"] & a.lr_opt["ci_low"].isna()).any():
        handles.append(Line2D([], [], ls="", marker="s", mfc="white", mec="grey",
                              label="no interval (see the lr* table)"))
    if (drawn & a.lr_opt["edge"].to_numpy(bool)).any():
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="grey",
                              label="on the grid edge (a bound)"))
    if np.isfinite(a.drift["slope"]).any():
        handles.append(Line2D([], [], ls="--", color="grey", label="least-squares fit"))
    place_legend(ax, handles, fontsize=8, title=f"bars: 95% interval ({interval_source(a)})",
                 title_fontsize=8)
    return save(fig, path)


# where an lr* interval's noise comes from, by the lr* table's ci_method (intervals.Noise)
NOISE_WORDS = {SEEDS: "seeds' jackknife", POINTS: "seeds' scatter at each LR",
               FIT: "fit residuals"}


def interval_source(a: Analysis) -> str:
    """What the drawn intervals come from: INTERVAL_SOURCE when the seeds' jackknife gave
    them all, else each source the lr* table names (`ci_method`), and the grid's placement
    (a one-seed store's bars, from the fit's residuals, were said to be the seeds')."""
    used = a.lr_opt.loc[np.isfinite(a.lr_opt["ci_low"].to_numpy(float)), "ci_method"]
    kinds = [k for k in NOISE_WORDS if k in set(used)]
    if kinds in ([], [SEEDS]):
        return INTERVAL_SOURCE
    return " / ".join(NOISE_WORDS[k] for k in kinds) + " + grid placement"


def plot_stability(a: Analysis, path: Path) -> Path:
    """Per family: the bracket [largest LR where every seed trained, smallest where any seed
    diverged], its geometric mean, and the smallest LR where every seed diverged (x)."""
    fig, ax = subplots(figsize=(6.4, 4.6))
    fams = families(a, a.stability)
    colors = family_colors([lab for lab, _ in fams])
    slope_by = dict(families(a, a.stability_slope))
    for i, (label, st) in enumerate(fams):
        st = st.sort_values("width")
        col = colors[label]
        shift = dodge(i, len(fams))  # keep brackets of families apart
        w = st["width"].to_numpy() * shift
        both = np.isfinite(st["boundary"]).to_numpy()
        s = slope_by[label].iloc[0]
        text = (f"{label}: slope {s['slope']:+.2f}{_interval_text(s['ci_low'], s['ci_high'])}"
                if np.isfinite(s["slope"]) else label)
        ax.vlines(w[both], st["largest_trained"][both], st["smallest_any_diverged"][both],
                  color=col, lw=3, alpha=0.45)
        only_ok = ~both & np.isfinite(st["largest_trained"]).to_numpy()
        trained = np.isfinite(st["largest_trained"]).to_numpy().any()
        ax.plot(w, st["smallest_all_diverged"], "x", color=col, ms=6, mew=1.5,
                label=None if trained else f"{label}: nothing trained")
        ax.plot(w[both], st["boundary"][both], "o-", color=col, ms=5,
                label=text if both.any() else None)
        ax.plot(w[only_ok], st["largest_trained"][only_ok], "^", color=col, ms=7,
                label=None if both.any() or not only_ok.any() else f"{label}: no divergence")
        fitted = both & st["clean"].to_numpy(bool)  # the slope leaves ambiguous ones out
        _fit_line(ax, st["width"][fitted].to_numpy(), s["slope"], s["intercept"], shift,
                  color=col)
    _x_axis(a, ax)
    log2_axis(ax, "y", np.concatenate([a.stability["largest_trained"],
                                       a.stability["smallest_any_diverged"],
                                       a.stability["smallest_all_diverged"]]))
    ax.set_ylabel("learning rate (log2 scale)" if a.choice.target == "lr"
                  else f"{a.choice.target_label} (log2 scale)")
    ax.set_title(f"Stability boundary against {a.scale_name('width')}")
    ax.grid(alpha=0.3)
    place_legend(ax, _stability_handles(a, ax), fontsize=8)
    return save(fig, path)


def _stability_handles(a: Analysis, ax) -> list:
    """The families' entries, then one per kind of mark drawn (none for a mark not drawn)."""
    handles, _ = ax.get_legend_handles_labels()
    if np.isfinite(a.stability["boundary"]).any():
        handles.append(Line2D([], [], color="grey", lw=3, alpha=0.45,
                              label="all seeds trained .. a seed diverged"))
    if np.isfinite(a.stability["smallest_all_diverged"]).any():
        handles.append(Line2D([], [], ls="", marker="x", color="grey", mew=1.5,
                              label="every seed diverged"))
    if (~np.isfinite(a.stability["boundary"]) & np.isfinite(a.stability["largest_trained"])).any():
        what = "LR" if a.choice.target == "lr" else a.choice.target_label
        handles.append(Line2D([], [], ls="", marker="^", color="grey",
                              label=f"largest {what} run, all trained\n"
                                    "(the boundary lies above)"))
    return handles
