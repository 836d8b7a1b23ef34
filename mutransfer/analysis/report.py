"""PNG figures and one self-contained report.html (figures embedded as base64 data URIs).

The report opens from disk with no server and keeps working when moved or mailed: it links
nothing, loads nothing, and runs no script.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mutransfer.analysis.coordplot import plot_coord_check, read_coord
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.curves import plot_training_curves
from mutransfer.analysis.plots import plot_loss_vs_lr, plot_lr_opt, plot_stability
from mutransfer.analysis.sections import Section, header_lines, sections

REPORT = "report.html"


@dataclass
class Figure:
    path: Path
    title: str
    caption: str


def make_figures(a: Analysis, out: Path) -> dict[str, Figure]:
    """Every figure the folder supports, keyed by the table section it goes with."""
    figs = {
        "loss_vs_lr": Figure(plot_loss_vs_lr(a, out / "loss_vs_lr.png"), "Loss against LR",
                             "Seed-adjusted mean final eval loss at each LR, a line per width "
                             "through the LRs where every seed trained. Stars: fitted lr* "
                             "(hollow when on the grid edge); hollow diamonds: some seeds "
                             "diverged (mean of the others; not fitted); x on the top edge: "
                             "every seed diverged; ticks on the bottom edge: LRs the family "
                             "ran at another width but not at this one; triangles: trained "
                             "but above the y range."),
        "drift": Figure(plot_lr_opt(a, out / "lr_opt_vs_width.png"), "Optimal LR against width",
                        "lr* per width with its 95% interval (noise draws; hollow square: "
                        "no interval, hollow circle: on the grid edge, a bound); dashed: "
                        "least-squares fit of log2 lr* on log2 width, slope and its "
                        "interval in the legend."),
        "stability": Figure(plot_stability(a, out / "stability_vs_width.png"),
                            "Stability boundary against width",
                            "Bars span the largest LR where every seed trained to the "
                            "smallest where any seed diverged; dots are their geometric mean "
                            "(the onset); x: the smallest LR where every seed diverged."),
    }
    curves = plot_training_curves(a, a.prepared, a.steps, out / "training_curves.png")
    if curves is not None:
        figs["curves"] = Figure(curves, "Training curves",
                                "Eval loss against step for every cell, mean over seeds; "
                                "colour is the LR.")
    coord = read_coord(a.results_dir)
    if coord is not None:
        figs["coord"] = Figure(plot_coord_check(coord, out / "coord_check.png"),
                               "Coordinate check",
                               "RMS size of each activation (top) and of its change since "
                               "initialisation (bottom) against width, log-log.")
    return figs


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.6em 0; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #eee; text-align: left; }
th { background: #f4f4f4; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, p.caption { color: #555; font-size: 0.9em; }
"""


def _img(fig: Figure) -> str:
    data = base64.b64encode(fig.path.read_bytes()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(fig.title)}">'
            f"<figcaption><b>{html.escape(fig.title)}.</b> {html.escape(fig.caption)}"
            "</figcaption></figure>")


def _section(s: Section) -> str:
    with pd.option_context("display.max_colwidth", None):  # notes must not be cut short
        body = (f"<p>{html.escape(s.line)}</p>" if s.line
                else s.view.to_html(index=False, border=0, escape=True))
    return (f'<h2 id="{s.key}">{html.escape(s.title)}</h2>'
            f'<p class="caption">{html.escape(s.caption)}</p>{body}')


def render_html(a: Analysis, figs: dict[str, Figure]) -> str:
    title = f"Transfer report: {a.name}"
    parts = [f"<h1>{html.escape(title)}</h1><ul>"]
    parts += [f"<li>{html.escape(line)}</li>" for line in header_lines(a)] + ["</ul>"]
    if "loss_vs_lr" in figs:
        parts.append(_img(figs["loss_vs_lr"]))
    for s in sections(a):
        parts.append(_section(s))
        if s.key in figs:
            parts.append(_img(figs[s.key]))
    for key, heading in (("curves", "Training curves"), ("coord", "Coordinate check")):
        if key in figs:
            parts += [f"<h2>{heading}</h2>", _img(figs[key])]
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


def write_report(a: Analysis, out: Path) -> list[Path]:
    """Write the figures and report.html under `out`; returns the PNG paths, then the report."""
    out.mkdir(parents=True, exist_ok=True)
    figs = make_figures(a, out)
    report = out / REPORT
    report.write_text(render_html(a, figs), encoding="utf-8")
    return [f.path for f in figs.values()] + [report]
