"""The tables `--dry-run` prints: every cell (or adaptive group) and its state in the store,
and the table helper a strategy's own listing uses (mutransfer/sweep/search/)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from mutransfer.results.store import StoreState
from mutransfer.sweep.plan.cells import Plan


def fmt_value(value: Any) -> str:
    """An axis value in a message or listing: floats (LRs) to 3 significant digits."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def cell_listing(plan: Plan, state: StoreState) -> str:
    rows = []
    for cell in plan.cells:
        row = state.complete.get(cell.trial_id)
        if row is not None:
            status = str(row["status"])
        elif cell.trial_id in state.failed:
            status = "failed before, to run"
        else:
            status = "to run"
        shown = {k: (fmt_value(v) if k == "lr" else v) for k, v in cell.columns.items()}
        rows.append({"trial_id": cell.trial_id, **shown, "status": status})
    return table(rows, ("trial_id", "status"))


def group_listing(plan: Plan, budgets: Mapping[str, int]) -> str:
    """One row per adaptive group; `budgets`: the trials each group still has to run."""
    rows = []
    for g in plan.groups:
        left = budgets.get(g.group_id, 0)
        rows.append({"group": g.group_id, **g.columns,
                     "lr range": f"{fmt_value(2.0 ** g.log2_lo)}..{fmt_value(2.0 ** g.log2_hi)}",
                     "done": g.budget - left, "to run": left})
    return table(rows, ("group", "done", "to run"))


# the axis columns every listing shows, even where they hold one value everywhere
ALWAYS_SHOWN = ("width", "parameterization", "lr")


def table(rows: list[dict[str, Any]], shown: Iterable[str] = ()) -> str:
    """The rows as a text table; a column with one value everywhere (e.g. the optimizer)
    says nothing per row and is left out unless it is one of ALWAYS_SHOWN or `shown`."""
    if not rows:
        return "(no cells)"
    df = pd.DataFrame(rows)
    always = {*ALWAYS_SHOWN, *shown}
    keep = [c for c in df.columns
            if c in always or df[c].astype(str).nunique() > 1]
    return df[keep].to_string(index=False)
