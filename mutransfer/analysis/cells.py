"""One group's trials as seed x LR arrays, and per-LR statistics for any resample of its seeds.

Keeping a group as arrays lets the bootstrap recompute every cell statistic for a thousand
resamples at once instead of regrouping a DataFrame each time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class SeedLrArrays:
    """Sums per (seed, LR) so that repeated trials of one seed and LR simply add up."""

    seeds: np.ndarray      # (S,) seed values
    lrs: np.ndarray        # (L,) learning rates, ascending
    n_trials: np.ndarray   # (S, L) trials run
    n_div: np.ndarray      # (S, L) trials that diverged
    n_loss: np.ndarray     # (S, L) trials with a finite loss (trained)
    loss_sum: np.ndarray   # (S, L) sum of their losses
    loss_sq: np.ndarray    # (S, L) sum of squared losses

    @property
    def log2_lr(self) -> np.ndarray:
        return np.log2(self.lrs)


@dataclass
class CellStats:
    """Per-LR statistics of one resample (leading axis B: one row per resample)."""

    n_trials: np.ndarray   # (B, L)
    n_div: np.ndarray      # (B, L)
    n_loss: np.ndarray     # (B, L)
    mean_loss: np.ndarray  # (B, L) mean over seeds that trained; NaN when none did
    std_loss: np.ndarray   # (B, L) sample std over seeds that trained; NaN below two

    @property
    def diverged(self) -> np.ndarray:
        """An LR diverged when the majority of its trials diverged (a tie counts as trained)."""
        return 2 * self.n_div > self.n_trials

    @property
    def usable(self) -> np.ndarray:
        """LRs that enter the optimum: run, not diverged, and with a loss to average."""
        return (self.n_trials > 0) & ~self.diverged & (self.n_loss > 0)

    @property
    def usable_loss(self) -> np.ndarray:
        """The mean loss of the usable LRs, NaN elsewhere: what the optimum is fitted to."""
        return np.where(self.usable, self.mean_loss, np.nan)


def seed_lr_arrays(group: pd.DataFrame) -> SeedLrArrays:
    """Arrays of one group (one family at one width) from its prepared trial rows."""
    seeds = np.sort(group["seed"].unique())
    lrs = np.sort(group["lr"].unique())
    s = np.searchsorted(seeds, group["seed"].to_numpy())
    l_ = np.searchsorted(lrs, group["lr"].to_numpy())
    shape = (len(seeds), len(lrs))
    loss = group["loss"].to_numpy(dtype="float64")
    has = np.isfinite(loss)
    arrays = [np.zeros(shape) for _ in range(5)]
    np.add.at(arrays[0], (s, l_), 1.0)
    np.add.at(arrays[1], (s, l_), group["diverged"].to_numpy(dtype="float64"))
    np.add.at(arrays[2], (s, l_), has.astype("float64"))
    np.add.at(arrays[3], (s, l_), np.where(has, loss, 0.0))
    np.add.at(arrays[4], (s, l_), np.where(has, loss * loss, 0.0))
    return SeedLrArrays(seeds, lrs, *arrays)


def cell_stats(arr: SeedLrArrays, idx: np.ndarray) -> CellStats:
    """Statistics per LR for each row of `idx` (B, S): the seeds drawn in that resample."""
    def total(a: np.ndarray) -> np.ndarray:
        return a[idx].sum(axis=1)

    n_trials, n_div, n_loss = total(arr.n_trials), total(arr.n_div), total(arr.n_loss)
    s1, s2 = total(arr.loss_sum), total(arr.loss_sq)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n_loss > 0, s1 / n_loss, np.nan)
        var = (s2 - n_loss * mean**2) / (n_loss - 1)
        std = np.where(n_loss > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
    return CellStats(n_trials, n_div, n_loss, mean, std)


def all_seeds(arr: SeedLrArrays) -> np.ndarray:
    """The identity resample: every seed once, as one row."""
    return np.arange(len(arr.seeds))[None, :]
