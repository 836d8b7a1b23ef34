"""The table `--dry-run` prints: every cell (or adaptive group) and its state in the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from mutransfer.results.store import StoreState
from mutransfer.sweep.grid import Plan
from mutransfer.sweep.progress import fmt_value

if TYPE_CHECKING:
    from mutransfer.sweep.runner import Work


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
    return _table(rows)


def group_listing(plan: Plan, work: Work) -> str:
    """One row per adaptive group; `work` is plan_work's answer for the store."""
    rows = []
    for g in plan.groups:
        left = work.budgets.get(g.group_id, 0)
        rows.append({"group": g.group_id, **g.columns,
                     "lr range": f"{fmt_value(2.0 ** g.log2_lo)}..{fmt_value(2.0 ** g.log2_hi)}",
                     "done": g.budget - left, "to run": left})
    return _table(rows)


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no cells)"
    df = pd.DataFrame(rows)
    # a column with one value everywhere (e.g. the optimizer) says nothing per row
    keep = [c for c in df.columns
            if c in ("trial_id", "group", "status", "done", "to run") or df[c].astype(str)
            .nunique() > 1 or c in ("width", "parameterization", "lr")]
    return df[keep].to_string(index=False)
