"""Transfer regret (tune at the smallest width, use everywhere) and monotonicity in width.

Losses are the observed mean eval losses of cells (over seeds that trained), not fitted values,
so a width's best loss is the lowest cell it actually reached and regret is never negative.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.drift import widths_text
from mutransfer.analysis.groups import as_key


def _best(cells: pd.DataFrame) -> tuple[float, float]:
    """(lr, mean loss) of the best cell that trained; NaNs if none did."""
    ok = cells[~cells["diverged"] & np.isfinite(cells["mean_loss"])]
    if not len(ok):
        return np.nan, np.nan
    row = ok.loc[ok["mean_loss"].idxmin()]
    return float(row["lr"]), float(row["mean_loss"])


def regret_rows(fam_key: tuple, cells: pd.DataFrame, lr_opt: pd.DataFrame,
                family_cols: list[str]) -> list[dict]:
    opt = lr_opt.sort_values("width")
    w0 = int(opt["width"].iloc[0])
    lr0 = float(opt["lr_opt"].iloc[0])
    rows = []
    for width, wc in cells.groupby("width", sort=True):
        best_lr, best_loss = _best(wc)
        row = {**dict(zip(family_cols, fam_key)), "width": int(width), "tuned_at": w0,
               "lr_transferred": lr0, "lr_used": np.nan, "lr_gap_log2": np.nan,
               "loss_used": np.nan, "best_lr": best_lr, "best_loss": best_loss,
               "regret": np.nan, "transfer": "no optimum at the smallest width"}
        if np.isfinite(lr0):
            gap = np.abs(np.log2(wc["lr"].to_numpy()) - np.log2(lr0))
            used = wc.iloc[int(np.argmin(gap))]
            row.update(lr_used=float(used["lr"]), lr_gap_log2=float(gap.min()))
            if used["diverged"]:
                row.update(regret=np.inf, transfer="diverged")
            else:
                row.update(loss_used=float(used["mean_loss"]), transfer="trained",
                           regret=float(used["mean_loss"]) - best_loss)
        rows.append(row)
    return rows


def regret_table(cells: pd.DataFrame, lr_opt: pd.DataFrame,
                 family_cols: list[str]) -> pd.DataFrame:
    """Per family and width: loss at the grid LR nearest (in log2) to the smallest width's lr*,
    minus the best loss at that width; `inf` when that LR diverged there."""
    rows: list[dict] = []
    opt_by_fam = dict(iter(lr_opt.groupby(family_cols, sort=True, dropna=False)))
    for k, fam_cells in cells.groupby(family_cols, sort=True, dropna=False):
        rows += regret_rows(as_key(k), fam_cells, opt_by_fam[k], family_cols)
    return pd.DataFrame(rows)


def monotonicity_table(lr_opt: pd.DataFrame, family_cols: list[str]) -> pd.DataFrame:
    """Whether the best loss strictly decreases with width, and the worst step against it."""
    rows = []
    for k, fam in lr_opt.groupby(family_cols, sort=True, dropna=False):
        fam = fam[np.isfinite(fam["best_loss"])].sort_values("width")
        widths, best = fam["width"].to_numpy(), fam["best_loss"].to_numpy()
        steps = np.diff(best)
        worst = int(np.argmax(steps)) if len(steps) else -1
        row = {**dict(zip(family_cols, as_key(k))), "n_widths": len(widths),
               "widths": widths_text(widths),
               "best_losses": ", ".join(f"{b:.4f}" for b in best),
               "monotone": bool(len(steps) and (steps < 0).all()),
               "worst_step": "", "note": ""}
        if len(steps) == 0:
            row["note"] = "needs a best loss at two widths at least"
        elif steps[worst] >= 0:
            row["worst_step"] = f"{widths[worst]}->{widths[worst + 1]}: {steps[worst]:+.4f}"
        rows.append(row)
    return pd.DataFrame(rows)
