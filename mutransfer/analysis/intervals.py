"""How noisy a group's loss curve is, and intervals for its optimal LR drawn from that noise.

The seed bootstrap alone cannot carry an interval with few seeds: S seeds have C(2S-1, S)
distinct resamples (3 for two seeds, 10 for three), so its "95% interval" is a percentile of a
handful of values. The noise of the curve is better estimated from every cell at once:

  pooled  the residuals of loss = cell mean + seed offset over all trained cells of the group
          (at least two seeds): (cells - 1) x (seeds - 1) degrees of freedom with every seed
          at every LR, e.g. 9 for ten LRs and two seeds;
  fit     without replicates (one seed, or Optuna LRs that no two seeds share): the residuals
          of the quadratic fit itself (fitted points - 3 degrees of freedom). They also hold
          any misfit of the parabola, so this interval errs wide.

Intervals are then a parametric bootstrap: each draw scales the noise by sqrt(df / chi2_df)
(the uncertainty of the noise estimate itself, which makes the draws t-like), adds Gaussian
noise of that size to every fitted cell mean, and refits lr* the same way as the point
estimate (argmin, window, parabola); the interval is the 2.5-97.5 percentiles of the draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mutransfer.analysis.cells import CellStats, SeedLrArrays
from mutransfer.analysis.fit import OptimumFit, fit_optimum
from mutransfer.analysis.tdist import t_quantile
from mutransfer.analysis_defaults import MIN_NOISE_DF

POOLED, FIT = "pooled", "fit"


@dataclass
class Noise:
    """The noise of one group's cell means: `sd` per LR (NaN where not fitted)."""

    source: str          # POOLED, FIT, or "" when there is none to use
    sigma: float         # pooled: per-trial sd; fit: sd of a cell mean about the parabola
    df: int              # degrees of freedom of sigma
    sd: np.ndarray       # (L,) sd of each cell's mean
    why: str = ""        # why there is none


def seed_components(mask: np.ndarray) -> int:
    """Connected groups of seeds (linked when they share a cell in `mask` (S, L)); seeds with
    no cell are not counted. Each group has its own free offset level."""
    seeds = np.flatnonzero(mask.any(axis=1))
    share = (mask.astype(int) @ mask.T.astype(int)) > 0
    seen: set[int] = set()
    n = 0
    for s in seeds:
        if s in seen:
            continue
        n += 1
        stack = [s]
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            stack += [u for u in np.flatnonzero(share[t]) if u not in seen]
    return n


def pooled_variance(arr: SeedLrArrays, stats: CellStats) -> tuple[float, int]:
    """(variance of one trial's loss about its cell mean + seed offset, degrees of freedom)
    over the group's trained cells, for the identity resample `stats`."""
    fit = stats.usable[0]
    n = arr.n_loss * fit[None]
    pred = np.nan_to_num(stats.mean_loss[0])[None] + stats.offsets[0][:, None]
    rss = float(np.where(n > 0, arr.loss_sq - 2 * pred * arr.loss_sum + n * pred**2, 0.0).sum())
    mask = n > 0
    params = int(fit.sum()) + int(mask.any(axis=1).sum()) - seed_components(mask)
    df = int(n.sum()) - params
    return (max(rss, 0.0) / df if df > 0 else np.nan), df


def group_noise(arr: SeedLrArrays, stats: CellStats, fit: OptimumFit) -> Noise:
    """Pooled noise when it has MIN_NOISE_DF degrees of freedom, else the fit's residuals
    when they do, else none (and why)."""
    usable = stats.usable[0]
    var, df = pooled_variance(arr, stats)
    if df >= MIN_NOISE_DF:
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.where(usable, np.sqrt(var / stats.n_loss[0]), np.nan)
        return Noise(POOLED, float(np.sqrt(var)), df, sd)
    df_fit = int(fit.n_points[0]) - 3
    if df_fit >= MIN_NOISE_DF and np.isfinite(fit.rss[0]):
        sigma = float(np.sqrt(fit.rss[0] / df_fit))
        return Noise(FIT, sigma, df_fit, np.where(usable, sigma, np.nan))
    seeds = int(arr.n_loss.any(axis=1).sum())
    if seeds < 2:
        why = (f"one seed, and the fit's residuals have {max(df_fit, 0)} df (needs "
               f"{MIN_NOISE_DF})")
    else:
        why = (f"too few replicates to estimate the noise: pooled df {max(df, 0)}, fit df "
               f"{max(df_fit, 0)} (needs {MIN_NOISE_DF})")
    return Noise("", np.nan, max(df, 0), np.full(len(usable), np.nan), why)


def noise_draws(log2_lr: np.ndarray, curve: np.ndarray, noise: Noise, n_draws: int,
                rng: np.random.Generator, k: int) -> np.ndarray:
    """log2 lr* of `n_draws` curves: `curve` (L,) plus noise of the estimated size, refitted."""
    if not noise.source or n_draws <= 0:
        return np.empty(0)
    scale = np.sqrt(noise.df / rng.chisquare(noise.df, n_draws))
    z = rng.standard_normal((n_draws, len(curve)))
    y = curve[None, :] + scale[:, None] * noise.sd[None, :] * z
    return fit_optimum(log2_lr, y, k).log2_lr


def percentile_interval(draws: np.ndarray, percentiles: tuple[float, float]) -> tuple[float, float]:
    """(low, high) percentiles of the finite draws; NaNs when there are none."""
    finite = draws[np.isfinite(draws)]
    if len(finite) == 0:
        return np.nan, np.nan
    lo, hi = np.percentile(finite, percentiles)
    return float(lo), float(hi)


def expanded_percentiles(n_seeds: int, level: float = 0.95) -> tuple[float, float]:
    """Percentiles of the seed bootstrap's "expanded percentile interval" (Hesterberg 2015,
    "What teachers should know about the bootstrap", sec. 5.3): the plain percentile interval
    of n resamples is too narrow by about sqrt((n-1)/n) and uses z where t(n-1) is due, so
    the percentiles move out to where a normal quantile equals sqrt(n/(n-1)) t(level, n-1)."""
    if n_seeds < 2:  # nothing to resample: no bootstrap, and no expansion to compute
        return 50.0 * (1.0 - level), 100.0 - 50.0 * (1.0 - level)
    z = math.sqrt(n_seeds / (n_seeds - 1)) * t_quantile(level, n_seeds - 1)
    tail = 100.0 * 0.5 * (1.0 + math.erf(-z / math.sqrt(2.0)))
    return tail, 100.0 - tail


def distinct_resamples(n_seeds: int) -> int:
    """Distinct multisets of n seeds drawn from n with replacement: C(2n-1, n)."""
    return math.comb(2 * n_seeds - 1, n_seeds) if n_seeds > 0 else 0
