"""The analysis as documents: each table's title, caption and view, rendered as text (the
terminal), Markdown (analysis.md) and HTML (report.html). Strings only; write.py writes files."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mutransfer.analysis import views
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.drift import too_few
from mutransfer.analysis.fit import WINDOW_STEPS
from mutransfer.analysis.groups import set_entries
from mutransfer.analysis.provenance import provenance, sweep_file
from mutransfer.analysis_defaults import MIN_NOISE_DF


@dataclass
class Section:
    key: str            # the table's file stem
    title: str
    caption: str
    view: pd.DataFrame  # strings; empty when `line` says it all
    line: str = ""      # one line standing in for an empty table


def _group_words(a: Analysis) -> str:
    return ", ".join(["parameterization", *a.axes, "width"])


CELLS = ("A cell (one LR at one width) is trained when every seed that ran it trained, "
         "partially diverged when some seeds diverged, diverged when all did, and not run when "
         "no seed ran it there though the family ran it at another width.")


def lr_opt_section(a: Analysis) -> Section:
    caption = (
        f"Optimal LR per ({_group_words(a)}): the minimum of a curve fitted to the "
        "seed-adjusted mean final eval loss against log2 LR inside a window of "
        f"{WINDOW_STEPS:g} grid steps (at least {a.fit_window:g} octaves) centred "
        "on the optimum itself (tricube "
        "weights times each LR's precision from its seeds' scatter, moved until the optimum "
        "stops moving): the vertex of a parabola in log2 LR, else the argmin. one-LR shift: "
        "the most leaving one LR out moves lr* (octaves; '!' where that exceeds the "
        "interval's half-width). Only trained cells "
        "enter: partially diverged, diverged and not-run LRs are left out (and named in the "
        "note). " + CELLS + " "
        "95% interval: lr* -/+ t x s.e., the s.e. from how far each seed alone pulls the "
        "fitted optimum, pooled over the family's widths (from: seeds and the degrees of "
        "freedom, sum of seeds - 1 per width); with one seed, from the fits' residuals (fit). "
        f"None below {MIN_NOISE_DF} df, and none for an optimum on the edge (a bound). edge: "
        "the argmin is the smallest (low) or largest (high) LR that trained.")
    if not a.choice.is_default:
        caption = (f"The optimum of {choice_words(a)} per point of the scale axes, as for the "
                   "LR: read 'LR' below as the target" + ("" if a.choice.log else
                   " and octaves as its own units") + ". " + caption)
    title = ("Optimal learning rate" if a.choice.target == "lr"
             else f"Optimal {a.choice.target_label}")
    return Section("lr_opt", title, caption, views.view_lr_opt(a))


def drift_section(a: Analysis, compact: bool = False) -> Section:
    caption = (
        "Slope of log2 lr* against log2 width (least squares); the LR transfers when it is about "
        "0, and -1 means lr* ~ 1/width. 95% interval: slope -/+ t x s.e., the s.e. propagated "
        "from each width's lr* s.e. (how well the lr* are known; from: the noise's source and "
        "df). OLS 95%: slope -/+ t x OLS s.e. with df = widths - 2 (the scatter of lr* about "
        "the line; with df 1, t = 12.7). No interval when a width's optimum is on the edge "
        "(the slope is then a bound) or has none.")
    line = (f"drift {too_few(1, 1, '', a.scale_name('width'))} (found one: {a.widths[0]})"
            if len(a.widths) < 2 else "")
    view = views.view_drift(a, compact) if not line else pd.DataFrame()
    title = "Drift of the optimal LR with width"
    if not a.choice.is_default:
        title = f"Drift of {a.choice.opt_label} with {a.scale_name('width')}"
    return Section("drift", title, caption, view, line)


def stability_sections(a: Analysis) -> list[Section]:
    caption = (
        "boundary: geometric mean of the largest LR where every seed trained and the smallest "
        "where any seed diverged (above it training is unreliable); boundary (all seeds): of "
        "the largest LR where some seed trained and the smallest where every seed diverged. "
        "LRs not run at a width count as neither. Unstable but trained: trials that completed "
        "although their smoothed train loss went above the divergence bound (initial + "
        "diverge_delta) and recovered; from: the smallest LR where a seed did; max excursion: "
        "the largest such rise, nats over the initial loss. " + CELLS)
    out = [Section("stability", "Stability boundary", caption, views.view_stability(a))]
    if len(a.widths) > 1:
        w = a.scale_name("width")
        out.append(Section("stability_slope", f"Slope of the stability boundary with {w}",
                           f"Slope of log2 boundary against log2 {w} (least squares through "
                           "the bracket midpoints). 95% interval: from the brackets (each "
                           "boundary lies between the largest trained and the smallest "
                           "diverged LR): every slope of a line through all the brackets, "
                           "widened for the boundaries' scatter about a power law (scatter: "
                           "its sd in octaves). The OLS t interval (df widths - 2) treats the "
                           "midpoints as exact and is shown for comparison; slope (all "
                           "seeds): the same for the boundary where every seed diverged.",
                           views.view_stability_slope(a)))
    return out


def transfer_sections(a: Analysis) -> list[Section]:
    if len(a.widths) < 2:
        return []
    regret = ("Seed-adjusted mean eval loss at each width with the LR run there nearest (in "
              "log2) to lr* of the smallest width, minus the best mean loss among the LRs where "
              "every seed trained. 'partially diverged' or 'diverged' when any seed diverged at "
              "the LR used; 'stopped early' (no regret) when search.stop stopped it for falling "
              "behind; the note says when the family's LR nearest lr* was not run at that "
              "width.")
    w = a.scale_name("width")
    mono = f"Whether the best mean eval loss strictly decreases as the {w} grows."
    title = "Does wider do better?" if w == "width" else f"Does a larger {w} do better?"
    return [Section("regret", "Transfer regret", regret, views.view_regret(a)),
            Section("monotonicity", title, mono, views.view_monotonicity(a))]


def choice_words(a: Analysis) -> str:
    """'ssm_B.lr_mult (log2)' or 'train.weight_decay (linear, step 0.05)'."""
    c = a.choice
    return f"{c.target} ({'log2' if c.log else f'linear, step {c.step:g}'})"


def scale_sections(a: Analysis) -> list[Section]:
    """Drift and regret per scale axis, and the law: only when the choice is not the
    default (analysis/choice.py)."""
    if a.choice.is_default:
        return []
    c = a.choice
    unit = "octaves" if c.log else f"{c.target_label} units"
    y = f"log2 {c.opt_label}" if c.log else c.opt_label
    out = []
    if not a.scale_drift.empty:
        out.append(Section(
            "scale_drift", f"Drift of {c.opt_label} per doubling of each scale axis",
            f"Slope of {y} against log2 of each scale axis ({', '.join(c.scale)}), the other "
            "scale axes held at each value (at). 95% interval: slope -/+ t x s.e., the s.e. "
            f"propagated from each optimum's s.e. (the noise pooled over every scale point "
            "of a family). In " + unit + " per doubling.", views.view_scale_drift(a)))
    if not a.scale_regret.empty:
        out.append(Section(
            "scale_regret", "Transfer regret along each scale axis",
            f"Loss at the {c.target_label} run nearest {c.opt_label} of the axis's smallest "
            "value (tuned at), the other scale axes held, minus the best loss there; "
            "the row at the largest value is the regret of tuning small and using it large.",
            views.view_scale_regret(a)))
    if not a.law.coef.empty:
        out.append(Section(
            "law", f"One law: {y} = a + sum_i b_i log2(scale_i)",
            "Weighted least squares over the optima with an interval (weights 1/s.e.^2; edge "
            "optima are bounds and left out). Birge ratio: chi^2/(points - parameters); above "
            "1 the optima scatter about the law more than their intervals allow, the "
            "covariance is inflated by it and df = points - parameters. 'no fit' with fewer "
            "points than parameters.", views.view_law(a)))
    if not a.law.holdout.empty:  # empty where no family has an optimum to hold out
        out.append(Section(
            "law_holdout", "The law's held-out check",
            "Refit without the points at the largest value of each scale axis and predict "
            f"them: miss = measured - predicted ({unit}; the mean over the held points, with "
            "its 95% interval from their s.e. and the refit's covariance). all: refit without "
            "every point at any axis's largest value and predict the corner (every axis at "
            "its largest): the extrapolation a user makes to a model they cannot sweep.",
            views.view_law_holdout(a)))
    return out


def sections(a: Analysis) -> list[Section]:
    return [lr_opt_section(a), drift_section(a), *stability_sections(a), *transfer_sections(a),
            *scale_sections(a)]


def header_lines(a: Analysis) -> list[str]:
    """What was analysed: sweep, counts, axes, fixed settings, notes."""
    first = a.scale_name("width")
    lines = [f"sweep {a.sweep or '?'}: {a.n_trials} trials, "
             f"{'widths' if first == 'width' else first} "
             f"{', '.join(map(str, a.widths))}"
             + (f", grouped also by {', '.join(a.axes)}" if a.axes else "")]
    if not a.choice.is_default:
        src = "; ".join(f"{k} from the {v}" for k, v in a.choice.sources.items())
        lines.append(f"target {choice_words(a)}; scale axes {', '.join(a.choice.scale)} "
                     f"(the first in the width column of the main tables)"
                     + (f" ({src})" if src else ""))
    if a.fixed:
        lines.append("fixed: " + ", ".join(set_entries(k, v) for k, v in a.fixed.items()))
    lines += a.notes
    return lines


# Text and Markdown


def text_table(df: pd.DataFrame, indent: str = "  ") -> str:
    """Left-aligned columns separated by two spaces; empty trailing columns trimmed."""
    cols = [c for c in df.columns if df[c].astype(str).str.len().any()]
    cells = [[str(c) for c in cols]] + [[str(v) for v in row] for row in df[cols].to_numpy()]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(indent + line for line in lines)


def markdown_table(df: pd.DataFrame) -> str:
    def esc(v: object) -> str:
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(esc(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(esc(v) for v in row) + " |" for row in df.to_numpy()]
    return "\n".join([head, rule, *body])


def markdown(a: Analysis) -> str:
    parts = [f"# Transfer analysis: {a.name}", ""]
    parts += [f"- {line}" for line in header_lines(a)] + [""]
    for s in sections(a):
        parts += [f"## {s.title}", "", s.caption, ""]
        parts += [s.line if s.line else markdown_table(s.view), ""]
    return "\n".join(parts)


def summary_table(analysis: Analysis) -> str:
    """Compact text: best LR per width and parameterization, then drift per parameterization."""
    a = analysis
    what = ("optimal LR per width" if a.choice.is_default else
            f"optimum of {a.choice.target} per {', '.join(a.choice.scale)}")
    lines = [f"{what} (95% interval; from: the seeds' spread or the fit's "
             "residuals, with df; edge: optimum on the grid edge, widen the LR range)",
             text_table(views.view_lr_opt(a, compact=True))]
    flagged = views.flagged_cells(a)
    if flagged:
        lines.append("LRs left out of lr* (some seeds diverged, stopped early, or not run at "
                     "that width):")
        lines += [f"  {line}" for line in flagged]
    drift = drift_section(a, compact=True)
    if drift.line:
        lines.append(drift.line)
    else:
        c = a.choice
        value = f"log2 {c.opt_label}" if c.log else c.opt_label
        lines += [f"drift: slope of {value} against log2 {a.scale_name('width')}"
                  + (" (transfer ~ 0)" if c.target == "lr" else ""), text_table(drift.view)]
    for s in scale_sections(a):
        if s.key in ("scale_drift", "law", "law_holdout"):
            lines += [s.title, text_table(s.view)]
    return "\n".join(lines)


def full_text(analysis: Analysis) -> str:
    """Every section as text, for `mutransfer analyze`."""
    parts = [*header_lines(analysis), ""]
    for s in sections(analysis):
        parts.append(s.title)
        parts.append(s.line if s.line else text_table(s.view))
        parts.append("")
    return "\n".join(parts).rstrip()


# HTML


@dataclass
class Figure:
    """A PNG written by write.make_figures, with what report.html says about it."""

    path: Path
    title: str
    caption: str


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


def _provenance(a: Analysis) -> str:
    """Where the results came from (mutransfer/analysis/provenance.py), and the sweep file."""
    items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(text)}</li>"
                    for label, text in provenance(a))
    text = sweep_file(a)
    file = ("" if text is None else
            f"<details><summary>sweep file as run (sweep.yaml in the results folder)"
            f"</summary><pre>{html.escape(text)}</pre></details>")
    return f'<h2 id="provenance">Provenance</h2><ul>{items}</ul>{file}'


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
    parts.append(_provenance(a))
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")
