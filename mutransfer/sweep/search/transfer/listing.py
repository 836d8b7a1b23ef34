"""What a transfer search runs, in words (`validate`, the run's header) and as the table
`--dry-run` prints: one row per family and width."""

from __future__ import annotations

from typing import Any

import numpy as np

from mutransfer.sweep.plan.listing import fmt_value, table
from mutransfer.sweep.search.transfer.decisions import (
    Family,
    TransferSearch,
    WidthPlan,
    fmt_log2,
    lr_stats,
    settle_count,
    settle_radius,
)

# the columns of the table, shown even where they hold one value everywhere
COLUMNS = ("family", "LRs", "LRs done", "to run now", "lr*", "state")


def transfer_summary(search: TransferSearch) -> str:
    """What a transfer search runs at least, typically and at most (validate, dry runs)."""
    least, typical, most = search.bounds()
    opts = search.options
    widths = sorted({w for f in search.families for w in f.widths})
    n_lrs = sorted({len(f.lrs) for f in search.families})
    lrs = f"{n_lrs[0]}" if n_lrs[0] == n_lrs[-1] else f"{n_lrs[0]}-{n_lrs[-1]}"
    full = widths[:opts.full_widths]
    rest = len(widths) - len(full)
    per = max(settle_count(f, opts) for f in search.families)
    probe = ", plus probes upward to the first diverged LR" if opts.probe_stability else ""
    # the seeds' rule makes the typical and most counts upper ones (fewer seeds where they
    # cannot move lr*; the least count has every seed only at the first LRs, as the rule)
    seeds = (f"; beyond each wider width's first LRs one seed, the others only where they could "
             f"move lr* by more than {opts.seed_tolerance:g} octave"
             if opts.seed_tolerance is not None else "")
    wider = rest if full else rest - 1
    start = (f"all {lrs} LRs at width {', '.join(map(str, full))}" if full else
             "a walk from the grid's middle at the smallest width")
    # the window holds at most the grid's LRs; a width below which nothing trained walks
    # (three LRs first), so a window of more than that is not what runs at least
    window = min(opts.window, n_lrs[-1])
    if wider > 0:
        start += f", then a window of {window} at each of the {wider} wider widths" + \
            ("; a walk's 3 where nothing trained below" if window > 3 else "")
    return (f"transfer search over {most} cells: runs at least {least} ({start}), about "
            f"{typical} when each optimum is inside the grid (about {per} "
            f"LR{'s' * (per != 1)} a width: every LR within {settle_radius(opts):.2f} octaves), "
            f"at most {most}{probe}{seeds}")


def transfer_listing(search: TransferSearch) -> str:
    """One row per family and width: the LRs it runs, how many are done, what runs now."""
    now = set(search.to_run())
    rows = []
    for i, plans in search.plans().items():
        fam = search.families[i]
        for j, width in enumerate(fam.widths):
            row: dict[str, Any] = {"family": fam.label, "width": width}
            if j >= len(plans):  # not reached: what an earlier run left there still counts
                done = int(lr_stats(fam, width, search.results).done.sum())
                row.update({"LRs": f"window of {min(search.options.window, len(fam.lrs))}",
                            "LRs done": done,
                            "to run now": 0, "lr*": "", "state": "waits for narrower widths"})
            else:
                row.update(width_row(fam, plans[j], now))
            rows.append(row)
    return table(rows, COLUMNS)


def width_row(fam: Family, p: WidthPlan, now: set[str]) -> dict[str, Any]:
    lo, hi = p.window
    if p.full:
        lrs = f"all {len(fam.lrs)}"
    else:
        # beyond the first window: what runs now and what ran (a plan's `wanted` holds only
        # the LRs still asked for on top of the window, none once the width has settled)
        ran = set(np.flatnonzero(p.stats.done).tolist())
        extra = len((p.wanted | ran) - set(range(lo, hi + 1)))
        lrs = f"{fmt_value(fam.lrs[lo])}..{fmt_value(fam.lrs[hi])}" + \
            (f" +{extra} widened" if extra else "")
    state = ("settled" if not p.to_finish else "probing") if p.settled else "searching"
    return {"LRs": lrs, "LRs done": int(p.stats.done.sum()),
            "to run now": sum(t in now for k in p.wanted for t in fam.cell_ids(p.width, k)),
            "lr*": fmt_log2(p.log2_opt) if p.settled else "", "state": state}
