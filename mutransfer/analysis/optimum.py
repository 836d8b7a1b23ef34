"""Optimal LR per group with its interval, an edge flag, and the cell table.

lr* is fitted to the trained cells only (every seed that ran the LR trained; see cells.py), by
the windowed curve fit of fit.py. Its interval comes from the seeds' disagreement about the
optimum, pooled over the family's widths (intervals.py).

lr* is local: it reads the LRs inside its fit window and nothing else. The window decides
which LRs give the noise model that weighs the points (pointnoise.py), and the weights decide
where the window sits, so the two are iterated from the window around the argmin until the
window's LRs (those either fit of optima_of weighs) stop changing. An LR outside it, however
noisy, then moves lr* only by being the argmin or an edge of what trained. (The cell means
themselves are seed-adjusted with offsets fitted over every LR, cells.py: with every seed at
every LR they cancel; with a seed missing at some LR they are the one remaining path.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mutransfer.analysis.cells import (
    CellStats,
    SeedLrArrays,
    all_seeds,
    cell_stats,
    seed_lr_arrays,
)
from mutransfer.analysis.fit import MIN_SIDE, OptimumFit, fit_optimum, grid_window
from mutransfer.analysis.groups import Prepared, as_key
from mutransfer.analysis.intervals import Noise, Spread, family_noise, group_spread, t_interval
from mutransfer.analysis.pointnoise import lack_of_fit, point_variance
from mutransfer.analysis_defaults import FIT_WINDOW

SAMPLED_SEARCHES = ("optuna",)  # searches whose LRs are samples, not points of a shared grid
# most refits of the window's LRs and their noise model: a bound only; over the real-curve
# benchmark's sub-grids the set settled in 1-3 rounds, 4 where a 2-cycle was settled
LOCAL_ROUNDS = 8


@dataclass
class GroupOptimum:
    """Everything the other tables need about one group (a family at one width)."""

    key: tuple               # family values..., width
    arrays: SeedLrArrays
    stats: CellStats         # all seeds, one row
    fit: OptimumFit          # one row
    spread: Spread           # what the group tells of the noise
    edge_side: str = ""      # 'low' | 'high' | 'only' | '' (see edge_of)
    edge_hint: str = ""
    one_lr_shift: float = math.nan  # octaves: the most leaving one LR out moves lr*
    noise: Noise = field(default_factory=lambda: Noise("", math.nan, 0, "not pooled yet"))

    @property
    def n_seeds(self) -> int:
        return len(self.arrays.seeds)

    @property
    def log2_opt(self) -> float:
        return float(self.fit.log2_lr[0])

    @property
    def stderr(self) -> float:
        """Standard error of log2 lr*; NaN for a bound (edge) or without noise."""
        return math.nan if self.edge_side else self.noise.stderr(self.spread)

    def interval_log2(self) -> tuple[float, float]:
        return t_interval(self.log2_opt, self.stderr, self.noise)


def edge_of(stats: CellStats, fit: OptimumFit) -> tuple[str, str]:
    """('low' | 'high' | 'only' | '', hint) for an argmin on the edge of the LRs that trained."""
    usable = np.flatnonzero(stats.usable[0])
    am = int(fit.argmin[0])
    if am < 0:
        return "", "no LR trained in every seed"
    if len(usable) == 1:
        return "only", "only one LR trained in every seed: widen the LR range or refine it"
    if am == usable[-1]:
        if stats.any_diverged[0, am + 1:].any():
            return "high", ("optimum at the largest LR that trained in every seed (larger LRs "
                            "diverged in some or all seeds): it sits at the stability edge")
        return "high", "optimum at the largest LR that trained: widen the LR range upward"
    if am == usable[0]:
        return "low", "optimum at the smallest LR that trained: widen the LR range downward"
    return "", ""


def seed_curves(arr: SeedLrArrays, stats: CellStats) -> np.ndarray:
    """(S, L) each seed's mean loss at the usable LRs, NaN elsewhere."""
    return np.where(stats.usable[0][None, :], arr.seed_mean, np.nan)


def seed_variance(arr: SeedLrArrays, stats: CellStats, inside: np.ndarray) -> np.ndarray:
    """(L,) the shrunk variance of one seed's loss at each usable LR (pointnoise.py), read from
    the LRs `inside` and centred on the argmin; NaN where unusable or with one seed."""
    loss = stats.usable_loss[0]
    if not np.isfinite(loss).any():
        return np.full(len(loss), np.nan)
    centre = float(arr.log2_lr[int(np.nanargmin(loss))])
    return point_variance(arr, stats.usable[0], centre, inside)


@dataclass
class Weighed:
    """The noise model of a set of groups and the fits it weighs (one row per group)."""

    seed_var: np.ndarray   # (B, L) one seed's shrunk variance at each usable LR
    tau2: np.ndarray       # (B,) the LRs' own effect (pointnoise.lack_of_fit)
    point_var: np.ndarray  # (B, L) each LR's mean's variance, seeds' and tau2: what `fits` weighs
    first: OptimumFit      # weighed by the seeds' noise alone: tau2 is read from its residuals
    fits: OptimumFit       # weighed by the seeds' noise and tau2: lr*

    def window_lrs(self, before: np.ndarray) -> np.ndarray:
        """(B, L) the LRs either fit weighs (`before` where no optimum was fitted)."""
        weighed = (self.first.weights > 0) | (self.fits.weights > 0)
        return np.where(self.fits.fitted[:, None], weighed, before)


def weigh(groups: list[tuple[tuple, SeedLrArrays]], stats: list[CellStats], curves: np.ndarray,
          window: np.ndarray, inside: np.ndarray) -> Weighed:
    """The noise model of each group from its LRs `inside` (B, L), and the two fits."""
    seed_var = np.vstack([seed_variance(arr, st, inside[i])
                          for i, ((_, arr), st) in enumerate(zip(groups, stats))])
    return weigh_by(groups[0][1].log2_lr, stats, curves, window, seed_var)


def weigh_by(log2_lr: np.ndarray, stats: list[CellStats], curves: np.ndarray,
             window: np.ndarray, seed_var: np.ndarray) -> Weighed:
    """The two fits that one seed's variance at each LR, `seed_var` (B, L), weighs: the first by
    the seeds' noise of each LR's mean alone, the second with each LR's own effect added."""
    n_loss = np.vstack([st.n_loss[0] for st in stats])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_var = seed_var / n_loss
    first = fit_optimum(log2_lr, curves, window, point_var=mean_var)
    # each LR's own effect, common to its seeds (pointnoise.lack_of_fit), joins its variance
    tau2 = np.array([lack_of_fit(log2_lr, curves[i], mean_var[i], first.row(i))
                     for i in range(len(curves))])
    point_var = mean_var + tau2[:, None]
    fits = fit_optimum(log2_lr, curves, window, point_var=point_var)
    return Weighed(seed_var, tau2, point_var, first, fits)


def weigh_locally(groups: list[tuple[tuple, SeedLrArrays]], stats: list[CellStats],
                  curves: np.ndarray, window: np.ndarray) -> Weighed:
    """weigh() from the window's LRs, the window first around each argmin, then where the fits
    put it, until its LRs stop changing (a row that cycles settles: settle_cycles)."""
    x = groups[0][1].log2_lr
    finite = np.isfinite(curves)
    argmin = np.argmin(np.where(finite, curves, np.inf), axis=1)
    inside = finite & (np.abs(x[None, :] - x[argmin][:, None]) < window[:, None])
    seen, settled = [inside], np.zeros(len(curves), bool)
    for _ in range(LOCAL_ROUNDS):
        weighed = weigh(groups, stats, curves, window, inside)
        now = np.where(settled[:, None], inside, weighed.window_lrs(inside))
        if (now == inside).all():
            break
        now, settled = settle_cycles(seen, now, settled)
        seen.append(now)
        inside = now
    return weighed


def settle_cycles(seen: list[np.ndarray], now: np.ndarray,
                  settled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the window's LRs, the rows settled) after one round: a row of `now` (B, L) whose LRs
    return to a set it held before (`seen`) cycles, an LR at the window's edge leaving it when
    its scatter joins the noise model and re-entering when it does not (store B mup_ssm 64, a
    half-octave sub-grid: lr* -4.7592 / -4.7557 by turns). Such a row keeps the LRs every set
    of its cycle holds (the fit still weighs each of them) and stops there."""
    now, settled = now.copy(), settled.copy()
    for i in np.flatnonzero(~settled):
        back = [k for k, s in enumerate(seen) if (s[i] == now[i]).all()]
        if back:
            now[i] = np.logical_and.reduce([s[i] for s in seen[back[0]:]])
            settled[i] = True
    return now, settled


def optima_of(groups: list[tuple[tuple, SeedLrArrays]], window: float) -> list[GroupOptimum]:
    """lr* and the spread of groups that share their LRs, fitted in one call."""
    stats = [cell_stats(arr, all_seeds(arr)) for _, arr in groups]
    curves = np.vstack([st.usable_loss[0] for st in stats])
    log2_lr = groups[0][1].log2_lr
    window = grid_window(log2_lr, curves, window)
    w = weigh_locally(groups, stats, curves, window)
    left_out = leave_one_out(groups, window, w.seed_var, w.tau2)
    shifts = one_lr_shifts(log2_lr, curves, w.point_var, w.fits, window)
    out = []
    for i, ((key, arr), st) in enumerate(zip(groups, stats)):
        fit = w.fits.row(i)
        spread = group_spread(log2_lr, seed_curves(arr, st), curves[i], fit, left_out[i],
                              w.seed_var[i], st.n_loss[0], float(w.tau2[i]))
        side, hint = edge_of(st, fit)
        out.append(GroupOptimum(key, arr, st, fit, spread, side, hint, float(shifts[i])))
    return out


def leave_one_out(groups: list[tuple[tuple, SeedLrArrays]], window: np.ndarray,
                  seed_var: np.ndarray, tau2: np.ndarray) -> list[np.ndarray]:
    """Per group: (S,) log2 lr* of its curve refitted without each seed (its seed-adjusted
    mean over the other seeds; NaN where that fit has no optimum, or with one seed). Each
    point keeps the group's variance model (`seed_var`, per seed, over the seeds left, and
    the LR effect `tau2`)."""
    rows, pvar, owner, wins = [], [], [], []
    for i, (_, arr) in enumerate(groups):
        n = len(arr.seeds)
        if n >= 2:
            others = np.array([[t for t in range(n) if t != s] for s in range(n)])
            st = cell_stats(arr, others)
            rows.append(st.usable_loss)
            with np.errstate(invalid="ignore", divide="ignore"):
                pvar.append(seed_var[i][None, :] / st.n_loss + tau2[i])
            owner += [i] * n
            wins += [window[i]] * n
    out = [np.full(len(arr.seeds), np.nan) for _, arr in groups]
    if rows:
        fits = fit_optimum(groups[0][1].log2_lr, np.vstack(rows), np.array(wins),
                           point_var=np.vstack(pvar))
        found = np.where(fits.fitted, fits.log2_lr, np.nan)
        owner = np.array(owner)
        for i in np.unique(owner):
            out[i] = found[owner == i]
    return out


def one_lr_shifts(log2_lr: np.ndarray, curves: np.ndarray, mean_var: np.ndarray,
                  fits: OptimumFit, window: np.ndarray) -> np.ndarray:
    """(B,) the largest |move| of each fitted lr* when one LR inside its window is left out
    and the curve refitted (NaN without a fitted optimum). A refit that then finds no optimum
    is left out of the maximum (the interval's notes already say when a side is thin)."""
    rows, pvar, owner = [], [], []
    for i in np.flatnonzero(fits.fitted):
        for j in np.flatnonzero(fits.weights[i] > 0):
            row = curves[i].copy()
            row[j] = np.nan
            rows.append(row)
            pvar.append(mean_var[i])
            owner.append(i)
    out = np.full(len(curves), np.nan)
    if not rows:
        return out
    owner = np.array(owner)
    refit = fit_optimum(log2_lr, np.vstack(rows), window[owner], point_var=np.vstack(pvar))
    move = np.abs(np.where(refit.fitted, refit.log2_lr, np.nan) - fits.log2_lr[owner])
    for i in np.unique(owner):
        m = move[owner == i]
        out[i] = float(np.nanmax(m)) if np.isfinite(m).any() else math.nan
    return out


def family_grids(prep: Prepared) -> dict[tuple, np.ndarray]:
    """Per family: the LRs of its grid (every LR run at some width, Optuna's samples left out),
    so that a width which did not run one of them can say so."""
    t = prep.trials
    search = t["search"] if "search" in t else pd.Series("grid", index=t.index)
    grid = t[~search.astype(str).isin(SAMPLED_SEARCHES)]
    return {as_key(k): np.sort(g["lr"].unique())
            for k, g in grid.groupby(prep.family_cols, sort=True, dropna=False)}


def group_optima(prep: Prepared, window: float = FIT_WINDOW) -> list[GroupOptimum]:
    """Every group's optimum, each with its family's pooled noise (groups on one LR grid are
    fitted together: the fit is vectorised over rows)."""
    grids = family_grids(prep)
    by_grid: dict[bytes, list[tuple[tuple, SeedLrArrays]]] = {}
    order = []
    for key, group in prep.trials.groupby(prep.group_cols, sort=True, dropna=False):
        key = as_key(key)
        arr = seed_lr_arrays(group, grids.get(key[:-1]))
        by_grid.setdefault(arr.lrs.tobytes(), []).append((key, arr))
        order.append(key)
    found = {g.key: g for groups in by_grid.values() for g in optima_of(groups, window)}
    out = [found[key] for key in order]
    # noise pooled over the scale axes' points of a family (the width role and the others)
    pool = [i for i, c in enumerate(prep.group_cols) if c in prep.pool_cols]
    families: dict[tuple, list[GroupOptimum]] = {}
    for g in out:
        families.setdefault(tuple(g.key[i] for i in pool), []).append(g)
    for members in families.values():
        noise = family_noise([g.spread for g in members if not g.edge_side])
        for g in members:
            g.noise = noise
    return out


def lr_text(lr: float) -> str:
    """2^-12, 2^-11.5 for LRs on a quarter-octave grid, else 3 significant digits (as for a
    value no power of 2 is: 0, a linear target's value that views.py lists as an LR)."""
    if not (math.isfinite(lr) and lr > 0):
        return f"{lr:.3g}"
    e = float(np.log2(lr))
    if abs(4 * e - round(4 * e)) < 1e-6:
        return f"2^{round(4 * e) / 4:g}"
    return f"{lr:.3g}"


def role_text(step: float | None = None) -> Callable[[float], str]:
    """How a note writes a value of the LR role: lr_text for the LR (and any target fitted in
    log2); for a linear target of grid step `step`, the value in the target's own units, 3
    significant digits (the role holds 2^(value / step): 0.15 was written 2^3)."""
    if step is None:
        return lr_text
    return lambda lr: f"{float(np.log2(lr)) * step:.3g}"


def lr_ranges(lrs: np.ndarray, mask: np.ndarray, text: Callable[[float], str] = lr_text) -> str:
    """The LRs where `mask` holds, runs of neighbours (in `lrs`) joined: '2^-12..2^-9, 2^-4';
    `text` writes one (role_text)."""
    parts, j = [], 0
    while j < len(lrs):
        if not mask[j]:
            j += 1
            continue
        end = j
        while end + 1 < len(lrs) and mask[end + 1]:
            end += 1
        parts.append(text(lrs[j]) if end == j else f"{text(lrs[j])}..{text(lrs[end])}")
        j = end + 1
    return ", ".join(parts)


def interval_note(g: GroupOptimum) -> str:
    """Why the group has no interval, or ''."""
    if g.fit.argmin[0] < 0 or np.isfinite(g.stderr):
        return ""
    if g.edge_side == "only":  # one LR: no side of the optimum is known, not even a bound
        return "no interval: one LR trained, which bounds the optimum on neither side"
    if g.edge_side:
        return "no interval: an optimum on the edge is a bound"
    if not g.fit.fitted[0]:
        return ("no interval: the curve has no minimum inside its window (too few LRs trained "
                "around the argmin, or the loss does not rise on both sides)")
    if not np.isfinite(g.spread.model_var):
        return "no interval: the LRs inside the window do not locate the optimum"
    if g.noise.source and g.spread.seed_units != g.noise.seed_units:
        return ("no interval: one seed at this width's LRs, so no scatter of its own, and the "
                "family's noise is its other widths' seeds' scatter: add a seed here")
    return f"no interval: {g.noise.why}"


def stopped_mask(g: GroupOptimum, stopped: set[float]) -> np.ndarray:
    """(L,) the group's LRs left out because a trial there stopped early (search.stop, the
    LRs `stopped`): to the estimator they are not run, to a reader they ran."""
    return ~g.stats.run[0] & np.isin(g.arrays.lrs, list(stopped))


def optimum_row(g: GroupOptimum, cols: list[str], was_stopped: np.ndarray,
                step: float | None = None) -> dict:
    """One row of lr_opt; `was_stopped`: stopped_mask; `step`: a linear target's grid step
    (its one-LR shift and the values its notes and `lrs_not_run` list are then said in the
    target's units, as its interval is; None: octaves and LRs)."""
    am = int(g.fit.argmin[0])
    s, arr = g.stats, g.arrays
    lo, hi = g.interval_log2()
    partial, not_run = s.partial[0], ~s.run[0] & ~was_stopped
    text = role_text(step)
    notes = [g.edge_hint, interval_note(g)]
    if g.fit.fitted[0] and g.fit.sides[0] < MIN_SIDE:
        notes.append("one trained LR on a side of lr* inside its window, so the curve's rise "
                     "there rests on one point: extend the LR range or refine it")
    if np.isfinite(hi - lo) and g.one_lr_shift > (hi - lo) / 2:
        shift = f"{g.one_lr_shift:.2f} octave" if step is None else \
            f"{g.one_lr_shift * step:.3g} (in its own units)"
        notes.append(f"one LR moves lr* by {shift}, more than the "
                     "interval's half-width: refine the grid around lr*")
    if partial.any():
        notes.append(f"partially diverged (left out): {lr_ranges(arr.lrs, partial, text)}")
    if was_stopped.any():
        notes.append("stopped early (search.stop, left out): "
                     f"{lr_ranges(arr.lrs, was_stopped, text)}")
    if not_run.any():
        notes.append(f"not run at this width: {lr_ranges(arr.lrs, not_run, text)}")
    fitted = bool(g.fit.fitted[0])
    return {
        **dict(zip(cols, g.key)),
        "lr_opt": float(2.0 ** g.log2_opt),
        "ci_low": 2.0**lo,
        "ci_high": 2.0**hi,
        "se_log2": g.stderr,
        "se_seeds_log2": g.noise.seed_stderr(g.spread) if np.isfinite(g.stderr) else np.nan,
        "grid_step": g.spread.step,
        "ci_method": g.noise.source if np.isfinite(g.stderr) else "",
        "ci_df": g.noise.df if np.isfinite(g.stderr) else 0,
        "method": ("parabola" if fitted else "argmin") if am >= 0 else "none",
        "curvature": float(g.fit.params[0, 1]) if fitted else np.nan,
        "n_fit_points": int(g.fit.n_points[0]) if fitted else 0,
        "one_lr_shift": g.one_lr_shift,
        "one_lr_flag": bool(g.one_lr_shift > (hi - lo) / 2) if np.isfinite(hi - lo) else False,
        "lr_argmin": float(arr.lrs[am]) if am >= 0 else np.nan,
        "best_loss": float(s.mean_loss[0, am]) if am >= 0 else np.nan,
        "loss_at_opt": float(g.fit.loss[0]),
        "n_lrs": int(s.usable[0].sum()),
        "n_lrs_partial": int(partial.sum()),
        "n_lrs_diverged": int(s.all_diverged[0].sum()),
        "n_lrs_not_run": int(not_run.sum()),
        "lrs_not_run": lr_ranges(arr.lrs, not_run, text),
        "n_lrs_stopped": int(was_stopped.sum()),
        "n_seeds": g.n_seeds,
        "edge": bool(g.edge_side),
        "edge_side": g.edge_side,
        "note": "; ".join(n for n in notes if n),
    }


def cell_rows(g: GroupOptimum, cols: list[str], was_stopped: np.ndarray) -> list[dict]:
    s, arr = g.stats, g.arrays
    status = s.status()
    return [{
        **dict(zip(cols, g.key)),
        "lr": float(lr),
        "status": status[j],
        "stopped": bool(was_stopped[j]),
        "n_seeds": int((arr.n_trials[:, j] > 0).sum()),
        "n_trials": int(s.n_trials[0, j]),
        "n_trained": int(s.n_loss[0, j]),
        "n_diverged": int(s.n_div[0, j]),
        "mean_loss": float(s.mean_loss[0, j]),
        "raw_mean_loss": float(s.raw_mean[0, j]),
        "std_loss": float(s.std_loss[0, j]),
    } for j, lr in enumerate(arr.lrs)]


def optimum_tables(optima: list[GroupOptimum], cols: list[str],
                   stopped: Callable[[tuple], set[float]] | None = None,
                   step: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lr_opt, cells) tables; `cols` are the group columns (family columns and width);
    `stopped(key)`: a group's LRs stopped early (Prepared.stopped_lrs); `step`: a linear
    target's grid step (optimum_row)."""
    masks = [stopped_mask(g, stopped(g.key) if stopped else set()) for g in optima]
    lr_opt = pd.DataFrame([optimum_row(g, cols, m, step) for g, m in zip(optima, masks)])
    cells = pd.DataFrame([r for g, m in zip(optima, masks) for r in cell_rows(g, cols, m)])
    return lr_opt, cells
