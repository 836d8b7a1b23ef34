"""The analysis as titled sections (title, caption, table view) shared by text, Markdown, HTML."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mutransfer.analysis import views
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.drift import NEEDS_TWO
from mutransfer.analysis_defaults import MIN_NOISE_DF, MIN_SEEDS_BOOT


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
        f"Optimal LR per ({_group_words(a)}): a quadratic in log2 LR fitted to the "
        f"seed-adjusted mean final eval loss at the {a.fit_points} trained LRs nearest the "
        "argmin, or at every trained LR within one octave of it if more; its vertex when it "
        "opens upward inside the fitted span, else the argmin. Only trained cells enter: "
        "partially diverged, diverged and not-run LRs are left out (and named in the note). "
        + CELLS + " "
        f"Interval: 2.5-97.5 percentiles of lr* refitted to {a.n_boot} noisy copies of the "
        "curve, the noise (noise column) estimated from every trained cell at once: pooled = "
        "the seeds' scatter about cell mean + seed offset, fit = the parabola's residuals "
        "(when there are no replicates); df its degrees of freedom, none below "
        f"{MIN_NOISE_DF}. No interval for an optimum on the edge (a bound). The seed bootstrap "
        f"is shown from {MIN_SEEDS_BOOT} seeds on (C(2S-1, S) distinct resamples: 3 for two "
        f"seeds, 10 for three, 126 for five). edge: the argmin is the smallest (low) or largest "
        "(high) LR that trained.")
    return Section("lr_opt", "Optimal learning rate", caption, views.view_lr_opt(a))


def drift_section(a: Analysis, compact: bool = False) -> Section:
    caption = (
        "Slope of log2 lr* against log2 width (least squares); the LR transfers when it is about "
        "0, and -1 means lr* ~ 1/width. 95% interval: 2.5-97.5 percentiles of the slopes "
        "refitted to each width's noise draws of lr* (how well the lr* are known). OLS 95%: "
        "slope -/+ t x OLS s.e. with df = widths - 2 (the scatter of lr* about the line; with "
        "df 1, t = 12.7). No interval when a width's optimum is on the edge (the slope is then "
        "a bound) or has none.")
    line = f"drift {NEEDS_TWO} (found one: {a.widths[0]})" if len(a.widths) < 2 else ""
    view = views.view_drift(a, compact) if not line else pd.DataFrame()
    return Section("drift", "Drift of the optimal LR with width", caption, view, line)


def stability_sections(a: Analysis) -> list[Section]:
    caption = (
        "boundary: geometric mean of the largest LR where every seed trained and the smallest "
        "where any seed diverged (above it training is unreliable); boundary (all seeds): of "
        "the largest LR where some seed trained and the smallest where every seed diverged. "
        "LRs not run at a width count as neither. " + CELLS)
    out = [Section("stability", "Stability boundary", caption, views.view_stability(a))]
    if len(a.widths) > 1:
        out.append(Section("stability_slope", "Stability boundary against width",
                           "Slope of log2 boundary against log2 width (least squares), with "
                           "the OLS t interval and its df (widths - 2); slope (all seeds): the "
                           "same for the boundary where every seed diverged.",
                           views.view_stability_slope(a)))
    return out


def transfer_sections(a: Analysis) -> list[Section]:
    if len(a.widths) < 2:
        return []
    regret = ("Seed-adjusted mean eval loss at each width with the LR run there nearest (in "
              "log2) to lr* of the smallest width, minus the best mean loss among the LRs where "
              "every seed trained. 'partially diverged' or 'diverged' when any seed diverged at "
              "the LR used; the note says when the family's LR nearest lr* was not run at that "
              "width.")
    mono = "Whether the best mean eval loss strictly decreases as the width grows."
    return [Section("regret", "Transfer regret", regret, views.view_regret(a)),
            Section("monotonicity", "Does wider do better?", mono, views.view_monotonicity(a))]


def sections(a: Analysis) -> list[Section]:
    return [lr_opt_section(a), drift_section(a), *stability_sections(a), *transfer_sections(a)]


def header_lines(a: Analysis) -> list[str]:
    """What was analysed: sweep, counts, axes, fixed settings, notes."""
    lines = [f"sweep {a.sweep or '?'}: {a.n_trials} trials, widths "
             f"{', '.join(map(str, a.widths))}"
             + (f", grouped also by {', '.join(a.axes)}" if a.axes else "")]
    if a.fixed:
        lines.append("fixed: " + ", ".join(f"{k}={v}" for k, v in a.fixed.items()))
    lines += a.notes
    return lines
