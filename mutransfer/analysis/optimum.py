"""Optimal LR per group with its interval, an edge flag, and the cell table.

lr* is fitted to the trained cells only (every seed that ran the LR trained; see cells.py).
Its interval comes from the noise of the whole curve (intervals.py); the bootstrap over seeds
is also reported, but only with MIN_SEEDS_BOOT seeds or more, where it has enough distinct
resamples to mean something.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mutransfer.analysis.cells import (
    CellStats,
    SeedLrArrays,
    all_seeds,
    cell_stats,
    seed_lr_arrays,
)
from mutransfer.analysis.fit import OptimumFit, fit_optimum
from mutransfer.analysis.groups import Prepared, as_key
from mutransfer.analysis.intervals import (
    Noise,
    expanded_percentiles,
    group_noise,
    noise_draws,
    percentile_interval,
)
from mutransfer.analysis_defaults import MIN_SEEDS_BOOT

CI_PERCENTILES = (2.5, 97.5)
SAMPLED_SEARCHES = ("optuna",)  # searches whose LRs are samples, not points of a shared grid


@dataclass
class GroupOptimum:
    """Everything the other tables need about one group (a family at one width)."""

    key: tuple               # family values..., width
    arrays: SeedLrArrays
    stats: CellStats         # all seeds, one row
    fit: OptimumFit          # all seeds, one row
    noise: Noise             # the curve's noise, which the interval draws from
    draws_log2: np.ndarray   # (n,) log2 lr* of noise draws; empty when there is no interval
    boot_log2: np.ndarray    # (n,) log2 lr* per seed resample; empty below MIN_SEEDS_BOOT seeds
    edge_side: str = ""      # 'low' | 'high' | 'only' | '' (see edge_of)
    edge_hint: str = ""

    @property
    def n_seeds(self) -> int:
        return len(self.arrays.seeds)


def _rng(seed: int, key: tuple, stream: int) -> np.random.Generator:
    """A generator per group and stream, fixed by the base seed and the group's key
    (independent of the order groups are analysed in)."""
    text = json.dumps([str(v) for v in key])
    return np.random.default_rng([seed, zlib.crc32(text.encode()), stream])


def bootstrap_log2(arr: SeedLrArrays, n_boot: int, rng: np.random.Generator,
                   k: int) -> np.ndarray:
    """log2 lr* of `n_boot` resamples of the group's seeds drawn with replacement (each
    resample judges its cells afresh: a cell is trained when no drawn seed diverged there)."""
    n_seeds = len(arr.seeds)
    if n_boot <= 0 or n_seeds < 2:
        return np.empty(0)
    idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    stats = cell_stats(arr, idx)
    return fit_optimum(arr.log2_lr, stats.usable_loss, k).log2_lr


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


def optimum_of(group: pd.DataFrame, key: tuple, n_boot: int, seed: int, k: int,
               lrs: np.ndarray | None = None) -> GroupOptimum:
    """lr*, its noise draws and seed bootstrap for one group; `lrs`: the family's grid."""
    arr = seed_lr_arrays(group, lrs)
    stats = cell_stats(arr, all_seeds(arr))
    fit = fit_optimum(arr.log2_lr, stats.usable_loss, k)
    noise = group_noise(arr, stats, fit)
    side, hint = edge_of(stats, fit)
    draws = np.empty(0)
    if not side and fit.argmin[0] >= 0:  # an optimum on the edge is a bound: no interval
        draws = noise_draws(arr.log2_lr, stats.usable_loss[0], noise, n_boot,
                            _rng(seed, key, 1), k)
    boot = np.empty(0)
    if len(arr.seeds) >= MIN_SEEDS_BOOT:
        boot = bootstrap_log2(arr, n_boot, _rng(seed, key, 0), k)
    return GroupOptimum(key, arr, stats, fit, noise, draws, boot, side, hint)


def family_grids(prep: Prepared) -> dict[tuple, np.ndarray]:
    """Per family: the LRs of its grid (every LR run at some width, Optuna's samples left out),
    so that a width which did not run one of them can say so."""
    t = prep.trials
    search = t["search"] if "search" in t else pd.Series("grid", index=t.index)
    grid = t[~search.astype(str).isin(SAMPLED_SEARCHES)]
    return {as_key(k): np.sort(g["lr"].unique())
            for k, g in grid.groupby(prep.family_cols, sort=True, dropna=False)}


def group_optima(prep: Prepared, n_boot: int, seed: int, k: int) -> list[GroupOptimum]:
    grids = family_grids(prep)
    out = []
    for key, group in prep.trials.groupby(prep.group_cols, sort=True, dropna=False):
        key = as_key(key)
        out.append(optimum_of(group, key, n_boot, seed, k, grids.get(key[:-1])))
    return out


def lr_text(lr: float) -> str:
    """2^-12, 2^-11.5 for LRs on a quarter-octave grid, else 3 significant digits."""
    e = float(np.log2(lr))
    if abs(4 * e - round(4 * e)) < 1e-6:
        return f"2^{round(4 * e) / 4:g}"
    return f"{lr:.3g}"


def lr_ranges(lrs: np.ndarray, mask: np.ndarray) -> str:
    """The LRs where `mask` holds, runs of neighbours (in `lrs`) joined: '2^-12..2^-9, 2^-4'."""
    parts, j = [], 0
    while j < len(lrs):
        if not mask[j]:
            j += 1
            continue
        end = j
        while end + 1 < len(lrs) and mask[end + 1]:
            end += 1
        parts.append(lr_text(lrs[j]) if end == j else f"{lr_text(lrs[j])}..{lr_text(lrs[end])}")
        j = end + 1
    return ", ".join(parts)


def interval_note(g: GroupOptimum) -> str:
    """Why the group has no interval, or ''."""
    if g.fit.argmin[0] < 0 or len(g.draws_log2):
        return ""
    if g.edge_side:
        return "no interval: an optimum on the edge is a bound"
    if not g.noise.source:
        return f"no interval: {g.noise.why}"
    return "no interval: no draws asked for (--bootstrap 0)"


def optimum_row(g: GroupOptimum, cols: list[str]) -> dict:
    am = int(g.fit.argmin[0])
    s, arr = g.stats, g.arrays
    lo, hi = percentile_interval(g.draws_log2, CI_PERCENTILES)
    b_lo, b_hi = percentile_interval(g.boot_log2, expanded_percentiles(g.n_seeds))
    partial, not_run = s.partial[0], ~s.run[0]
    notes = [g.edge_hint, interval_note(g)]
    if partial.any():
        notes.append(f"partially diverged (left out): {lr_ranges(arr.lrs, partial)}")
    if not_run.any():
        notes.append(f"not run at this width: {lr_ranges(arr.lrs, not_run)}")
    return {
        **dict(zip(cols, g.key)),
        "lr_opt": float(2.0 ** g.fit.log2_lr[0]),
        "ci_low": 2.0**lo,
        "ci_high": 2.0**hi,
        "ci_method": g.noise.source if len(g.draws_log2) else "",
        "noise_df": g.noise.df,
        "noise_sd": g.noise.sigma,
        "boot_low": 2.0**b_lo,
        "boot_high": 2.0**b_hi,
        "method": ("quadratic" if g.fit.quadratic[0] else "argmin") if am >= 0 else "none",
        "lr_argmin": float(arr.lrs[am]) if am >= 0 else np.nan,
        "best_loss": float(s.mean_loss[0, am]) if am >= 0 else np.nan,
        "loss_at_opt": float(g.fit.loss[0]),
        "n_lrs": int(s.usable[0].sum()),
        "n_lrs_partial": int(partial.sum()),
        "n_lrs_diverged": int(s.all_diverged[0].sum()),
        "n_lrs_not_run": int(not_run.sum()),
        "lrs_not_run": lr_ranges(arr.lrs, not_run),
        "n_seeds": g.n_seeds,
        "n_draws": int(np.isfinite(g.draws_log2).sum()),
        "n_boot": int(np.isfinite(g.boot_log2).sum()),
        "edge": bool(g.edge_side),
        "edge_side": g.edge_side,
        "note": "; ".join(n for n in notes if n),
    }


def cell_rows(g: GroupOptimum, cols: list[str]) -> list[dict]:
    s, arr = g.stats, g.arrays
    status = s.status()
    return [{
        **dict(zip(cols, g.key)),
        "lr": float(lr),
        "status": status[j],
        "n_seeds": int((arr.n_trials[:, j] > 0).sum()),
        "n_trials": int(s.n_trials[0, j]),
        "n_trained": int(s.n_loss[0, j]),
        "n_diverged": int(s.n_div[0, j]),
        "mean_loss": float(s.mean_loss[0, j]),
        "raw_mean_loss": float(s.raw_mean[0, j]),
        "std_loss": float(s.std_loss[0, j]),
    } for j, lr in enumerate(arr.lrs)]


def optimum_tables(optima: list[GroupOptimum],
                   cols: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lr_opt, cells) tables; `cols` are the group columns (family columns and width)."""
    lr_opt = pd.DataFrame([optimum_row(g, cols) for g in optima])
    cells = pd.DataFrame([r for g in optima for r in cell_rows(g, cols)])
    return lr_opt, cells
