"""The analysis as titled sections (title, caption, table view) shared by text, Markdown, HTML."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mutransfer.analysis import views
from mutransfer.analysis.core import Analysis
from mutransfer.analysis.drift import NEEDS_TWO


@dataclass
class Section:
    key: str            # the table's file stem
    title: str
    caption: str
    view: pd.DataFrame  # strings; empty when `line` says it all
    line: str = ""      # one line standing in for an empty table


def _group_words(a: Analysis) -> str:
    return ", ".join(["parameterization", *a.axes, "width"])


def lr_opt_section(a: Analysis) -> Section:
    caption = (
        f"Optimal LR per ({_group_words(a)}): a quadratic in log2 LR fitted to the mean final "
        f"eval loss at the {a.fit_points} LRs nearest the argmin, or at every LR within one "
        "octave of it if more (LRs where most seeds diverged are left out); its vertex when it "
        "opens upward inside the fitted span, else the argmin. "
        f"Interval: 2.5-97.5 percentiles of lr* over {a.n_boot} resamples of the seeds with "
        f"replacement (RNG seed {a.boot_seed}). edge: the argmin is the smallest (low) or largest "
        "(high) LR that trained.")
    return Section("lr_opt", "Optimal learning rate", caption, views.view_lr_opt(a))


def drift_section(a: Analysis) -> Section:
    caption = (
        "Slope of log2 lr* against log2 width (least squares); the LR transfers when it is about "
        "0, and -1 means lr* ~ 1/width. Interval: 2.5-97.5 percentiles of the slopes refitted to "
        "each bootstrap resample (seeds resampled per width); OLS s.e. shown for comparison.")
    line = f"drift {NEEDS_TWO} (found one: {a.widths[0]})" if len(a.widths) < 2 else ""
    view = views.view_drift(a) if not line else pd.DataFrame()
    return Section("drift", "Drift of the optimal LR with width", caption, view, line)


def stability_sections(a: Analysis) -> list[Section]:
    caption = (
        "An LR diverged when the majority of its seeds diverged (a tie counts as trained). "
        "boundary: geometric mean of the largest LR that trained and the smallest that diverged.")
    out = [Section("stability", "Stability boundary", caption, views.view_stability(a))]
    if len(a.widths) > 1:
        out.append(Section("stability_slope", "Stability boundary against width",
                           "Slope of log2 boundary against log2 width (least squares).",
                           views.view_stability_slope(a)))
    return out


def transfer_sections(a: Analysis) -> list[Section]:
    if len(a.widths) < 2:
        return []
    regret = ("Mean eval loss at each width with the grid LR nearest (in log2) to lr* of the "
              "smallest width, minus the best mean loss at that width.")
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
