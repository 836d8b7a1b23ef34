"""Shared figure helpers: figures on an Agg canvas of their own, colours by width, log2 axes,
saving."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

DPI = 120


def subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, layout=None, **kw):
    """pyplot.subplots without pyplot: the figure is drawn on an Agg canvas of its own (files
    only: no display, no GUI toolkit), and the process's backend and figure list stay the
    caller's. Before, importing this module set the process's backend to Agg
    (matplotlib.use), so a notebook that had called make_plots or coord_check showed none of
    its own figures after (plt.show(): 'FigureCanvasAgg is non-interactive')."""
    fig = Figure(figsize=figsize, layout=layout)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kw)


def colormap(name: str):
    return colormaps[name]


def width_colors(widths: list[int]) -> dict[int, tuple]:
    """Widths coloured along viridis in log2 order (dark = narrow, yellow = wide)."""
    cmap = colormap("viridis")
    n = len(widths)
    return {w: cmap(0.1 + 0.8 * (i / max(n - 1, 1))) for i, w in enumerate(sorted(widths))}


def family_colors(labels: list[str]) -> dict[str, tuple]:
    cmap = colormap("tab10")
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def _pow2_label(v: float, _pos: object = None) -> str:
    """`2^-5`, or `2^-5.5` at the half and quarter octaves `log2_axis` adds on a narrow range."""
    e = round(float(np.log2(v)), 2)
    return f"$2^{{{e:g}}}$"


def _tick_exponents(lo_v: float, hi_v: float, max_ticks: int) -> list[float]:
    """Whole octaves (every 2nd, 3rd... on a wide range); halves, then quarters, when fewer
    than three fall inside [lo_v, hi_v] (a range of an octave or so showed one label)."""
    lo, hi = int(np.floor(lo_v)), int(np.ceil(hi_v))
    step = max(1, int(np.ceil((hi - lo + 1) / max_ticks)))
    ticks = [float(e) for e in range(lo, hi + 1) if e % step == 0]
    for frac in (0.5, 0.25):
        if sum(lo_v - 1e-9 <= e <= hi_v + 1e-9 for e in ticks) >= 3:
            break
        ticks = [float(e) for e in np.arange(lo, hi + frac / 2, frac)]
    return ticks


def log2_axis(ax, which: str, values: np.ndarray, max_ticks: int = 7) -> None:
    """A log2 axis with ticks at whole octaves (every 2nd, 3rd... when the range is wide; at
    half or quarter octaves when it is narrow)."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values) & (values > 0)]
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    if not len(values):
        return
    exps = _tick_exponents(float(np.log2(values.min())), float(np.log2(values.max())),
                           max_ticks)
    axis.set_major_locator(FixedLocator([2.0**e for e in exps]))
    axis.set_major_formatter(FuncFormatter(_pow2_label))
    axis.set_minor_locator(NullLocator())


def dodge(i: int, n: int, spread: float = 0.04) -> float:
    """The factor that shifts series i of n apart on a log2 x axis (`spread` octaves each),
    so that points and bars at one x value do not hide one another."""
    return 2.0 ** (spread * (i - (n - 1) / 2))


def width_axis(ax, widths: list[int]) -> None:
    """log2 x axis labelled with the widths themselves."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(widths)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{int(round(v))}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(widths) * 2**-0.4, max(widths) * 2**0.4)  # half an octave of margin
    ax.set_xlabel("width (d_model, log2 scale)")


def place_legend(ax, handles: list, **kw) -> None:
    """The axes' legend: inside where it fits best; below the axes, in columns, when it is
    large (many entries or long labels), as inside it covered the points."""
    labels = [h.get_label() for h in handles]
    if len(handles) > 5 or max((len(t) for t in labels), default=0) > 40:
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.15),
                  ncols=1 if max(len(t) for t in labels) > 40 else 2, **kw)
    else:
        ax.legend(handles=handles, **kw)


def fit_suptitle(fig, parts: list[str], **kw):
    """The figure's title, a line per part, each part wrapped at word boundaries until no
    line is wider than the figure (a long title ran off it)."""
    title = fig.suptitle("\n".join(parts), **kw)
    renderer = fig.canvas.get_renderer()
    chars = max(len(p) for p in parts)
    while title.get_window_extent(renderer).width > fig.bbox.width and chars > 16:
        chars = int(chars * 0.9)
        title.set_text("\n".join(textwrap.fill(p, chars) for p in parts))
    return title


def pad_limits(lo: float, hi: float, frac: float = 0.05) -> tuple[float, float]:
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.1
    return lo - frac * span, hi + frac * span


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # no pyplot: freed with its last reference
    return path
