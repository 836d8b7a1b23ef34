"""Shared figure helpers: the Agg backend, colours by width, log2 axes, saving."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

DPI = 120


def width_colors(widths: list[int]) -> dict[int, tuple]:
    """Widths coloured along viridis in log2 order (dark = narrow, yellow = wide)."""
    cmap = plt.get_cmap("viridis")
    n = len(widths)
    return {w: cmap(0.1 + 0.8 * (i / max(n - 1, 1))) for i, w in enumerate(sorted(widths))}


def family_colors(labels: list[str]) -> dict[str, tuple]:
    cmap = plt.get_cmap("tab10")
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def _pow2_label(v: float, _pos: object = None) -> str:
    e = np.log2(v)
    return f"$2^{{{int(round(e))}}}$" if abs(e - round(e)) < 1e-9 else ""


def log2_axis(ax, which: str, values: np.ndarray, max_ticks: int = 7) -> None:
    """A log2 axis with ticks at whole octaves (every 2nd, 3rd... when the range is wide)."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values) & (values > 0)]
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    if not len(values):
        return
    lo, hi = int(np.floor(np.log2(values.min()))), int(np.ceil(np.log2(values.max())))
    step = max(1, int(np.ceil((hi - lo + 1) / max_ticks)))
    axis.set_major_locator(FixedLocator([2.0**e for e in range(lo, hi + 1) if e % step == 0]))
    axis.set_major_formatter(FuncFormatter(_pow2_label))
    axis.set_minor_locator(NullLocator())


def width_axis(ax, widths: list[int]) -> None:
    """log2 x axis labelled with the widths themselves."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(widths)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{int(round(v))}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(widths) * 2**-0.4, max(widths) * 2**0.4)  # half an octave of margin
    ax.set_xlabel("width (d_model, log2 scale)")


def pad_limits(lo: float, hi: float, frac: float = 0.05) -> tuple[float, float]:
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.1
    return lo - frac * span, hi + frac * span


def save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path
