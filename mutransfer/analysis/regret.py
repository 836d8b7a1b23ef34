"""Transfer regret (tune at the smallest width, use everywhere) and monotonicity in width.

Losses are the observed mean eval losses of cells (seed-adjusted, see cells.py), not fitted
values, so a width's best loss is the lowest cell it actually reached and regret is never
negative. Only cells where every seed trained count as reached: when any seed diverged at the
LR used, the transfer is `partially diverged` and its regret is inf, as when all diverged.
The LR used is the LR run at that width nearest (in log2) to the transferred lr*; when the
family's nearest LR was not run at that width (a search window), the note says so and how far
the one used lies from lr* (for a linear target, in its own units: `step` below, its grid
step; the fit's role holds 2^(value / step)). An LR where search.stop stopped a trial early
ran, though the estimator treats it as not run (cells.py `stopped`): when it is the one nearest
lr*, the transfer is `stopped early` and has no regret (no final loss; the stop rule stopped it
for falling behind the best LR), rather than the next LR out standing in for it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mutransfer.analysis.cells import NOT_RUN, PARTIAL, TRAINED
from mutransfer.analysis.drift import plural, widths_text
from mutransfer.analysis.groups import as_key
from mutransfer.analysis.optimum import role_text

STOPPED = "stopped"  # status_used of an LR where search.stop stopped a trial early
TRANSFER = {TRAINED: "trained", PARTIAL: "partially diverged", STOPPED: "stopped early"}


def _best(cells: pd.DataFrame) -> tuple[float, float]:
    """(lr, mean loss) of the best cell where every seed trained; NaNs if there is none."""
    ok = cells[cells["status"].eq(TRAINED) & np.isfinite(cells["mean_loss"])]
    if not len(ok):
        return np.nan, np.nan
    row = ok.loc[ok["mean_loss"].idxmin()]
    return float(row["lr"]), float(row["mean_loss"])


def _nearest(cells: pd.DataFrame, lr: float) -> tuple[pd.Series, float]:
    """The row of `cells` nearest `lr` in log2, and its distance in octaves."""
    gap = np.abs(np.log2(cells["lr"].to_numpy()) - np.log2(lr))
    return cells.iloc[int(np.argmin(gap))], float(gap.min())


def gap_text(gap: float, step: float | None = None) -> str:
    """How far the LR used lies from lr*: octaves, or a linear target's own units."""
    return f"{gap:.2f} octaves" if step is None else f"{gap * step:.3g}"


def _status(cell: pd.Series) -> str:
    """A cell's status, `stopped` where search.stop stopped a trial there early (the cells
    table says `not run`, as the estimator never sees it; yet it ran)."""
    return STOPPED if bool(cell.get("stopped", False)) else str(cell["status"])


def transfer_columns(wc: pd.DataFrame, lr0: float, step: float | None = None) -> dict:
    """lr_nearest / lr_used / regret columns of one width's cells for the transferred `lr0`;
    `step`: a linear target's grid step, for the note (None: the LR)."""
    nearest, _ = _nearest(wc, lr0)
    stopped = wc["stopped"].astype(bool) if "stopped" in wc else False
    used, gap = _nearest(wc[~wc["status"].eq(NOT_RUN) | stopped], lr0)
    status = _status(used)
    out = {"lr_nearest": float(nearest["lr"]), "nearest_run": _status(nearest) != NOT_RUN,
           "lr_used": float(used["lr"]), "lr_gap_log2": gap, "status_used": status,
           "transfer": TRANSFER.get(status, "diverged"),
           "regret": np.nan if status == STOPPED else np.inf, "note": ""}
    notes = []
    text = role_text(step)
    if not out["nearest_run"]:
        notes.append(f"{text(out['lr_nearest'])} (nearest to lr*) not run at this width; "
                     f"used {text(out['lr_used'])}, {gap_text(gap, step)} from lr*")
    if status == TRAINED:
        out["loss_used"] = float(used["mean_loss"])
    elif status == STOPPED:
        notes.append(f"search.stop stopped {text(out['lr_used'])} early at this width (its "
                     "loss fell behind the best LR's): no final loss, so no regret")
    else:
        notes.append(f"{int(used['n_diverged'])} of {int(used['n_trials'])} trials diverged at "
                     "the LR used")
    out["note"] = "; ".join(notes)
    return out


def regret_rows(fam_key: tuple, cells: pd.DataFrame, lr_opt: pd.DataFrame,
                family_cols: list[str], scale_col: str = "width",
                step: float | None = None) -> list[dict]:
    opt = lr_opt.sort_values(scale_col)
    w0 = int(opt[scale_col].iloc[0])
    lr0 = float(opt["lr_opt"].iloc[0])
    side = str(opt["edge_side"].iloc[0]) if "edge_side" in opt else ""
    # an optimum on the grid's edge is a bound, not lr*: the regret is of that LR (before, the
    # table gave it without a word, as if the smallest width's optimum were known)
    bound = (f"the lr* transferred is a bound on the grid's {side} edge, not an optimum: "
             "this is the regret of that LR" if side in ("low", "high") else
             "the lr* transferred rests on one trained LR: this is the regret of that LR"
             if side == "only" else "")
    rows = []
    for width, wc in cells.groupby(scale_col, sort=True):
        best_lr, best_loss = _best(wc)
        row = {**dict(zip(family_cols, fam_key)), scale_col: int(width), "tuned_at": w0,
               "lr_transferred": lr0, "lr_nearest": np.nan, "nearest_run": False,
               "lr_used": np.nan, "lr_gap_log2": np.nan, "status_used": "",
               "loss_used": np.nan, "best_lr": best_lr, "best_loss": best_loss,
               "regret": np.nan, "transfer": "no optimum at the smallest width", "note": ""}
        if np.isfinite(lr0):
            row.update(transfer_columns(wc, lr0, step))
            if row["transfer"] == "trained":
                row["regret"] = row["loss_used"] - best_loss
            row["note"] = "; ".join(filter(None, [bound, row["note"]]))
        rows.append(row)
    return rows


def regret_table(cells: pd.DataFrame, lr_opt: pd.DataFrame,
                 family_cols: list[str], scale_col: str = "width",
                 step: float | None = None) -> pd.DataFrame:
    """Per family and width (or another scale axis's column `scale_col`; the family is then
    every other group column): loss at the LR run nearest (in log2) to the smallest width's
    lr*, minus the best loss at that width; `inf` when any seed diverged at that LR there.
    `step`: a linear target's grid step (transfer_columns)."""
    rows: list[dict] = []
    opt_by_fam = dict(iter(lr_opt.groupby(family_cols, sort=True, dropna=False)))
    for k, fam_cells in cells.groupby(family_cols, sort=True, dropna=False):
        rows += regret_rows(as_key(k), fam_cells, opt_by_fam[k], family_cols, scale_col,
                            step)
    return pd.DataFrame(rows)


def scale_regret_table(cells: pd.DataFrame, lr_opt: pd.DataFrame, group_cols: list[str],
                       scale_cols: list[str], step: float | None = None) -> pd.DataFrame:
    """The regret of tuning at the smallest value of each scale axis in `scale_cols` (the
    other scale axes held), a `scale` column naming the axis; `step` as for regret_table."""
    parts = []
    for scale_col in scale_cols:
        fam = [c for c in group_cols if c != scale_col]
        t = regret_table(cells, lr_opt, fam, scale_col, step)
        t.insert(len(fam), "scale", scale_col)
        parts.append(t[[*group_cols, "scale", *[c for c in t if c not in group_cols
                                                 and c != "scale"]]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def monotonicity_table(lr_opt: pd.DataFrame, family_cols: list[str],
                       label: str = "width") -> pd.DataFrame:
    """Whether the best loss strictly decreases with width (`label`: the name of the axis in
    the width role, for the notes), and the worst step against it."""
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
            row["note"] = f"needs a best loss at two {plural(label)} at least"
        elif steps[worst] >= 0:
            row["worst_step"] = f"{widths[worst]}->{widths[worst + 1]}: {steps[worst]:+.4f}"
        rows.append(row)
    return pd.DataFrame(rows)
