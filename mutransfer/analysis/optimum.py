"""Optimal LR per group with a bootstrap interval over seeds, an edge flag, and the cell table."""

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

CI_PERCENTILES = (2.5, 97.5)


@dataclass
class GroupOptimum:
    """Everything the other tables need about one group (a family at one width)."""

    key: tuple               # family values..., width
    arrays: SeedLrArrays
    stats: CellStats         # all seeds, one row
    fit: OptimumFit          # all seeds, one row
    boot_log2: np.ndarray    # (n_boot,) log2 lr* per bootstrap resample; NaN where none trained


def _rng(seed: int, key: tuple) -> np.random.Generator:
    """A generator per group fixed by the base seed and the group's key (order-independent)."""
    text = json.dumps([str(v) for v in key])
    return np.random.default_rng([seed, zlib.crc32(text.encode())])


def bootstrap_log2(arr: SeedLrArrays, n_boot: int, seed: int, key: tuple, k: int) -> np.ndarray:
    """log2 lr* of `n_boot` resamples of the group's seeds drawn with replacement.

    Empty when there is nothing to resample (one seed) or no bootstrap was asked for.
    """
    n_seeds = len(arr.seeds)
    if n_boot <= 0 or n_seeds < 2:
        return np.empty(0)
    idx = _rng(seed, key).integers(0, n_seeds, size=(n_boot, n_seeds))
    stats = cell_stats(arr, idx)
    fit = fit_optimum(arr.log2_lr, stats.usable_loss, k)
    return fit.log2_lr


def optimum_of(group: pd.DataFrame, key: tuple, n_boot: int, seed: int, k: int) -> GroupOptimum:
    arr = seed_lr_arrays(group)
    stats = cell_stats(arr, all_seeds(arr))
    fit = fit_optimum(arr.log2_lr, stats.usable_loss, k)
    return GroupOptimum(key, arr, stats, fit, bootstrap_log2(arr, n_boot, seed, key, k))


def group_optima(prep: Prepared, n_boot: int, seed: int, k: int) -> list[GroupOptimum]:
    out = []
    for key, group in prep.trials.groupby(prep.group_cols, sort=True, dropna=False):
        out.append(optimum_of(group, as_key(key), n_boot, seed, k))
    return out


def edge_of(g: GroupOptimum) -> tuple[str, str]:
    """('low' | 'high' | 'only' | '', hint) for an argmin on the edge of the LRs that trained."""
    usable = np.flatnonzero(g.stats.usable[0])
    am = int(g.fit.argmin[0])
    if am < 0:
        return "", "no LR trained: every LR diverged"
    if len(usable) == 1:
        return "only", "only one LR trained: widen the LR range or refine it"
    if am == usable[-1]:
        if g.stats.diverged[0, am + 1:].any():
            return "high", ("optimum at the largest LR that trained (larger LRs diverged): "
                            "it sits at the stability edge")
        return "high", "optimum at the largest LR of the grid: widen the LR range upward"
    if am == usable[0]:
        return "low", "optimum at the smallest LR of the grid: widen the LR range downward"
    return "", ""


def _interval(g: GroupOptimum) -> tuple[float, float]:
    finite = g.boot_log2[np.isfinite(g.boot_log2)]
    if len(finite) == 0:
        return np.nan, np.nan
    lo, hi = np.percentile(finite, CI_PERCENTILES)
    return float(2.0**lo), float(2.0**hi)


def optimum_row(g: GroupOptimum, cols: list[str]) -> dict:
    side, hint = edge_of(g)
    am = int(g.fit.argmin[0])
    lo, hi = _interval(g)
    if len(g.arrays.seeds) < 2 and not hint:
        hint = "one seed: no bootstrap interval"
    return {
        **dict(zip(cols, g.key)),
        "lr_opt": float(2.0 ** g.fit.log2_lr[0]),
        "ci_low": lo,
        "ci_high": hi,
        "method": ("quadratic" if g.fit.quadratic[0] else "argmin") if am >= 0 else "none",
        "lr_argmin": float(g.arrays.lrs[am]) if am >= 0 else np.nan,
        "best_loss": float(g.stats.mean_loss[0, am]) if am >= 0 else np.nan,
        "loss_at_opt": float(g.fit.loss[0]),
        "n_lrs": int(g.stats.usable[0].sum()),
        "n_lrs_diverged": int(g.stats.diverged[0].sum()),
        "n_seeds": len(g.arrays.seeds),
        "n_boot": int(np.isfinite(g.boot_log2).sum()),
        "edge": bool(side),
        "edge_side": side,
        "note": hint,
    }


def cell_rows(g: GroupOptimum, cols: list[str]) -> list[dict]:
    s, arr = g.stats, g.arrays
    rows = []
    for j, lr in enumerate(arr.lrs):
        rows.append({
            **dict(zip(cols, g.key)),
            "lr": float(lr),
            "n_seeds": int((arr.n_trials[:, j] > 0).sum()),
            "n_trials": int(s.n_trials[0, j]),
            "n_diverged": int(s.n_div[0, j]),
            "diverged": bool(s.diverged[0, j]),
            "mean_loss": float(s.mean_loss[0, j]),
            "std_loss": float(s.std_loss[0, j]),
        })
    return rows


def optimum_tables(optima: list[GroupOptimum],
                   cols: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lr_opt, cells) tables; `cols` are the group columns (family columns and width)."""
    lr_opt = pd.DataFrame([optimum_row(g, cols) for g in optima])
    cells = pd.DataFrame([r for g in optima for r in cell_rows(g, cols)])
    return lr_opt, cells
