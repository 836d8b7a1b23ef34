"""One group's trials as seed x LR arrays, and per-LR statistics for any resample of its seeds.

Keeping a group as arrays lets the bootstrap recompute every cell statistic for a thousand
resamples at once instead of regrouping a DataFrame each time.

A cell (one LR of a group) is, over the seeds that ran it:
  trained    every trial trained: the only cells that enter lr* and regret;
  partial    some seeds diverged and some trained ("partially diverged"): shown, never fitted,
             so a surviving seed cannot hide a failed one;
  diverged   every trial diverged;
  not run    no seed ran this LR here, though the family ran it at another width.
A cell's mean loss is seed-adjusted: each seed's loss minus that seed's offset (how far above or
below the other seeds it runs at the LRs they share), averaged over the seeds that trained. With
every seed at every LR the offsets cancel and it is the plain mean; with a seed missing at some
LR (a failed trial, a search window per seed) the remaining seeds' level does not move the cell.

`restrict` keeps a group's arrays at some LRs only, as if the others had not run: the noise
model of each LR (pointnoise.py) is read from the LRs inside lr*'s fit window through it, so
that the seeds' offsets behind that scatter come from those LRs too, and an LR outside the
window moves neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TRAINED, PARTIAL, DIVERGED, NOT_RUN = "trained", "partial", "diverged", "not run"
OFFSET_ITERATIONS = 200  # backfitting sweeps; a full design converges in two


@dataclass
class SeedLrArrays:
    """Sums per (seed, LR) so that repeated trials of one seed and LR simply add up."""

    seeds: np.ndarray      # (S,) seed values
    lrs: np.ndarray        # (L,) learning rates, ascending (not-run LRs of the family included)
    n_trials: np.ndarray   # (S, L) trials run
    n_div: np.ndarray      # (S, L) trials that diverged
    n_loss: np.ndarray     # (S, L) trials with a loss (trained)
    loss_sum: np.ndarray   # (S, L) sum of their losses
    loss_sq: np.ndarray    # (S, L) sum of squared losses

    @property
    def log2_lr(self) -> np.ndarray:
        return np.log2(self.lrs)

    @property
    def seed_mean(self) -> np.ndarray:
        """(S, L) mean loss of each seed's trained trials; NaN where it has none."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.n_loss > 0, self.loss_sum / self.n_loss, np.nan)


@dataclass
class CellStats:
    """Per-LR statistics of one resample (leading axis B: one row per resample)."""

    n_trials: np.ndarray   # (B, L)
    n_div: np.ndarray      # (B, L)
    n_loss: np.ndarray     # (B, L)
    mean_loss: np.ndarray  # (B, L) seed-adjusted mean over the trials that trained; NaN if none
    raw_mean: np.ndarray   # (B, L) plain mean over the trials that trained
    std_loss: np.ndarray   # (B, L) sample std of those trials' losses; NaN below two
    offsets: np.ndarray    # (B, S) seed offsets used by mean_loss (0 for a seed drawn 0 times)

    @property
    def run(self) -> np.ndarray:
        return self.n_trials > 0

    @property
    def trained(self) -> np.ndarray:
        """Run, and no trial diverged: the cells that enter lr* and regret."""
        return self.run & (self.n_div == 0)

    @property
    def any_diverged(self) -> np.ndarray:
        return self.n_div > 0

    @property
    def all_diverged(self) -> np.ndarray:
        return self.run & (self.n_div == self.n_trials)

    @property
    def partial(self) -> np.ndarray:
        return self.any_diverged & ~self.all_diverged

    @property
    def usable(self) -> np.ndarray:
        """LRs that enter the optimum: every trial there trained."""
        return self.trained & (self.n_loss > 0)

    @property
    def usable_loss(self) -> np.ndarray:
        """The mean loss of the usable LRs, NaN elsewhere: what the optimum is fitted to."""
        return np.where(self.usable, self.mean_loss, np.nan)

    def status(self, row: int = 0) -> np.ndarray:
        """TRAINED / PARTIAL / DIVERGED / NOT_RUN per LR of one resample."""
        out = np.full(self.n_trials.shape[1], NOT_RUN, dtype=object)
        out[self.trained[row]] = TRAINED
        out[self.partial[row]] = PARTIAL
        out[self.all_diverged[row]] = DIVERGED
        return out


def seed_lr_arrays(group: pd.DataFrame, lrs: np.ndarray | None = None) -> SeedLrArrays:
    """Arrays of one group (one family at one width) from its prepared trial rows; `lrs` adds
    the family's LRs this group did not run (columns with no trials)."""
    seeds = np.sort(group["seed"].unique())
    run = group["lr"].unique()
    lrs = np.unique(np.concatenate([run, lrs])) if lrs is not None else np.sort(run)
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


def restrict(arr: SeedLrArrays, keep: np.ndarray) -> SeedLrArrays:
    """`arr` as if only the LRs where `keep` (L,) holds had run (the others keep their column,
    with no trial in it)."""
    kept = {f: np.where(keep[None, :], getattr(arr, f), 0.0)
            for f in ("n_trials", "n_div", "n_loss", "loss_sum", "loss_sq")}
    return SeedLrArrays(arr.seeds, arr.lrs, **kept)


def seed_offsets(arr: SeedLrArrays, weight: np.ndarray, fit: np.ndarray) -> np.ndarray:
    """(B, S) offsets of the additive model loss = cell mean + seed offset, least squares over
    the `fit` cells (B, L) of each resample, seeds weighted by `weight` (B, S) (how often each
    was drawn). Solved by backfitting (alternate the two means), which converges to the
    least-squares fit; offsets of a seed sharing no fitted LR with another stay 0, and the
    offsets of the drawn seeds average 0 so a cell's mean is that of an average seed."""
    n = arr.n_loss[None] * (fit[:, None, :] & (arr.n_loss[None] > 0))   # (B, S, L)
    y = np.nan_to_num(arr.seed_mean)[None]
    wn = weight[:, :, None] * n
    den_l = wn.sum(axis=1)
    den_s = n.sum(axis=2)
    has = (den_s > 0) & (weight > 0)
    delta = np.zeros(weight.shape)
    for _ in range(OFFSET_ITERATIONS):
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = np.where(den_l > 0, (wn * (y - delta[:, :, None])).sum(axis=1) / den_l, 0.0)
            new = np.where(den_s > 0, (n * (y - mu[:, None, :])).sum(axis=2) / den_s, 0.0)
        w = weight * has
        centre = (w * new).sum(axis=1, keepdims=True) / np.maximum(w.sum(axis=1, keepdims=True),
                                                                   1e-300)
        new = np.where(has, new - centre, 0.0)
        done = np.abs(new - delta).max(initial=0.0) < 1e-13
        delta = new
        if done:
            break
    return delta


def cell_stats(arr: SeedLrArrays, idx: np.ndarray) -> CellStats:
    """Statistics per LR for each row of `idx` (B, S): the seeds drawn in that resample."""
    weight = np.zeros((len(idx), len(arr.seeds)))
    np.add.at(weight, (np.arange(len(idx))[:, None], idx), 1.0)

    def total(a: np.ndarray) -> np.ndarray:
        return weight @ a

    n_trials, n_div, n_loss = total(arr.n_trials), total(arr.n_div), total(arr.n_loss)
    s1, s2 = total(arr.loss_sum), total(arr.loss_sq)
    fit = (n_trials > 0) & (n_div == 0)
    delta = seed_offsets(arr, weight, fit)
    adjusted = s1 - (weight * delta) @ arr.n_loss   # each trial's loss minus its seed's offset
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(n_loss > 0, s1 / n_loss, np.nan)
        mean = np.where(n_loss > 0, adjusted / n_loss, np.nan)
        var = (s2 - n_loss * raw**2) / (n_loss - 1)
        std = np.where(n_loss > 1, np.sqrt(np.clip(var, 0.0, None)), np.nan)
    return CellStats(n_trials, n_div, n_loss, mean, raw, std, delta)


def all_seeds(arr: SeedLrArrays) -> np.ndarray:
    """The identity resample: every seed once, as one row."""
    return np.arange(len(arr.seeds))[None, :]
