"""How well each lr* is known: the seeds' disagreement about the optimum, pooled over a family.

Each seed's pull on lr* is the jackknife's: (seeds - 1) x how far lr* moves when the curve is
refitted without that seed (where such a refit finds no optimum, the seed's residuals projected
on the fitted curve's derivatives stand in: fit.seed_deviations). Their spread measures
everything that makes lr* uncertain at once: the noise of the points inside the fit's window
(however it grows away from the optimum: points outside the window never enter), and a
seed-specific optimum (a seed whose whole curve sits a little left or right), which shifts every
point of that seed together and which no per-point noise estimate sees.

Two seeds give one degree of freedom per width, so the seeds' variance is pooled over the
widths of a family (one parameterization and setting of the other axes, on one LR grid):
    s^2 = sum over widths and seeds of deviation^2 / sum over widths of (seeds - 1),
and lr* at a width with S seeds has standard error sqrt(s^2 / S) in log2 LR, its 95% interval
lr* -/+ t(df) x s.e. with df = sum (seeds - 1) (e.g. 3 for three widths of two seeds: t = 3.18).
The pooling assumes the widths of a family are about equally noisy around their optima; a
width that is not enlarges its neighbours' intervals and narrows its own.

Without replicates (one seed) the fit's own residuals stand in for the seeds: per-point noise
from the weighted residuals, pooled the same way (points in the window - parameters, per width),
through the fit's model variance of v. They also hold any misfit of the curve, so this interval
errs wide. No interval with fewer than MIN_NOISE_DF degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mutransfer.analysis.fit import (
    N_PARAMS,
    OptimumFit,
    model_variance,
    residual_variance,
    seed_deviations,
)
from mutransfer.analysis.tdist import t_quantile
from mutransfer.analysis_defaults import MIN_NOISE_DF

SEEDS, POINTS, FIT = "seeds", "points", "fit"
LEVEL = 0.95
# octaves: sd of lr* over the placements of a grid, whatever its step. Real curves have LR
# effects common to all seeds (on the dense quickstart sweep, mup_ssm width 256, one LR 0.1
# nats below the curve in every seed), which no seed's scatter shows. Calibrated on the dense
# real stores B and C (benchmarks/real_curves.py, both with the optimum >= 1 octave inside
# their one-octave sub-grids): 0.05 holds the dense 8-seed lr* in 0.965 / 0.926 (store B) and
# 0.978 / 0.972 (C) of the one-octave sub-grids' 3- / 4-seed intervals, where 0.1 held it in
# 0.993 / 0.982 and 1.000 / 1.000; on half-octave grids coverage is 0.98-1.00 at 0.05 (0.94-
# 1.00 even without the term, the sub-grids sharing seeds with the reference). The price: each
# offset's answer lies inside the other offsets' intervals in 0.98-1.00 of the half-octave
# pairs but 0.91-0.94 of the one-octave pairs (store B's alone: 0.86-0.89)
GRID_SD = 0.05
# what the plots and captions call these intervals
INTERVAL_SOURCE = "seeds' jackknife + grid placement"


@dataclass
class Spread:
    """What one group contributes to its family's noise estimate."""

    deviations: np.ndarray   # (S,) each seed's pull on log2 lr* (NaN: no fitted optimum)
    model_var: float         # v's variance per unit noise variance (the one-seed fallback)
    rss: float               # weighted residual sum of squares of the mean curve's fit
    rss_scale: float         # rss's expectation per unit noise variance
    df_fit: int              # points in the window - parameters
    df_points: int = 0       # the seeds' scatter at the window's LRs: sum (seeds - 1), less
                             # the seed offsets (0 with one seed)
    tau_var: float = 0.0     # var(log2 lr*) from the LRs' own effects (pointnoise.lack_of_fit)
    step: float = math.nan   # octaves between the window's LRs (median)
    seed_units: bool = True  # model_var weighs the seeds' own scatter at each LR (octave^2 per
                             # seed); False: per unit variance of a point (loss^-2 octave^2:
                             # one seed at the window's LRs, nothing to read a scatter from)

    @property
    def n_seeds(self) -> int:
        return int(np.isfinite(self.deviations).sum())


def seed_pulls(left_out: np.ndarray, linear: np.ndarray) -> np.ndarray:
    """Each seed's pull on lr* from the jackknife: (S - 1) x (mean of the leave-one-out lr* -
    lr* without that seed), which is how far that seed alone moves it to first order and keeps
    what a first-order projection misses (the skew of an optimum on a flat side, the shape a
    seed changes). `linear` (the first-order pulls) stands in where a refit has no optimum."""
    s = len(left_out)
    ok = np.isfinite(left_out)
    if s < 2 or ok.sum() < 2:
        return linear
    return np.where(ok, (s - 1) * (left_out[ok].mean() - left_out), linear)


def group_spread(log2_lr: np.ndarray, seed_loss: np.ndarray, curve: np.ndarray,
                 fit: OptimumFit, left_out: np.ndarray, seed_var: np.ndarray | None = None,
                 n_loss: np.ndarray | None = None, tau2: float = 0.0) -> Spread:
    """The spread of one group (`fit`: the one-row fit of its mean `curve` (L,);
    `seed_loss` (S, L): each seed's loss at the usable LRs, NaN elsewhere; `left_out` (S,):
    lr* refitted without each seed; `seed_var` (L,): the variance of one seed's loss at each
    LR, pointnoise.py, NaN with one seed; `n_loss` (L,): the seeds that trained there;
    `tau2`: the variance of each LR's own effect, common to its seeds)."""
    if not fit.fitted[0]:
        return Spread(np.full(len(seed_loss), np.nan), math.nan, math.nan, 0.0, 0)
    dev = seed_pulls(left_out, seed_deviations(log2_lr, seed_loss, fit))
    df_fit = int(fit.n_points[0]) - N_PARAMS
    rss, scale = residual_variance(log2_lr, curve, fit)
    has_var = seed_var is not None and bool(np.isfinite(seed_var).any())
    model_var = model_variance(log2_lr, fit, seed_var if has_var else None)
    if not model_var > 0:  # a singular design (NaN) or round-off: the optimum is not located
        return Spread(np.full(len(seed_loss), np.nan), math.nan, math.nan, 0.0, 0)
    inside = fit.weights[0] > 0
    df_points = 0
    if has_var and n_loss is not None:
        df_points = max(int(np.maximum(n_loss[inside] - 1, 0).sum()) - (len(seed_loss) - 1), 0)
    tau_var = 0.0
    if has_var and tau2 > 0:
        tau_var = model_variance(log2_lr, fit, np.full(len(curve), tau2))
    x_in = np.asarray(log2_lr, float)[inside]
    step = float(np.median(np.diff(x_in))) if len(x_in) > 1 else math.nan
    return Spread(dev, model_var, rss, scale, df_fit, df_points,
                  tau_var if np.isfinite(tau_var) else 0.0, step, has_var)


def grid_sd(step: float) -> float:
    """sd of lr* over the placements of a grid of this step (octaves): GRID_SD; 0 where the
    step is unknown (one LR in the window)."""
    return GRID_SD if np.isfinite(step) else 0.0


@dataclass
class Noise:
    """A family's pooled noise: the variance behind every width's standard error."""

    source: str      # SEEDS, FIT, or "" when there is none to use
    var: float       # of one point of one seed (loss^2): from the seeds, or the residuals
    df: int
    why: str = ""    # why there is none
    seed_units: bool = True  # the Spread.model_var units `var` was pooled in: a group in the
                             # other units has no standard error from it

    def stderr(self, spread: Spread) -> float:
        """The standard error of one group's log2 lr*, NaN where it has no fitted optimum:
        the seeds' noise, and beside it the LRs' own effects (what another placement of the
        grid would see differently; Spread.tau_var) and the grid's placement (grid_sd)."""
        return math.sqrt(self.seed_stderr(spread) ** 2 + grid_sd(spread.step) ** 2)

    def seed_stderr(self, spread: Spread) -> float:
        """stderr without the grid's placement term: what the data measure (the seeds' noise
        and the LRs' own effects). A drift across widths on one grid takes its placement
        term from elsewhere (analysis/drift.py): the widths share the grid."""
        if not self.source or not np.isfinite(spread.model_var):
            return math.nan
        if spread.seed_units != self.seed_units:
            # var is a ratio to one unit of model_var and the group's is in the other (a width
            # with one seed in a family whose others have several): 1e3-1e4 x too wide or narrow
            return math.nan
        if self.source in (SEEDS, POINTS):
            n = spread.n_seeds
            var = self.var * spread.model_var / n if n else math.nan
        else:
            var = self.var * spread.model_var
        return math.sqrt(var + spread.tau_var)

    @property
    def t(self) -> float:
        return t_quantile(LEVEL, self.df) if self.source else math.nan


def family_noise(spreads: list[Spread]) -> Noise:
    """Pool the seeds' deviations of a family's widths (FIT: the residuals without replicates)."""
    fitted = [s for s in spreads if np.isfinite(s.model_var)]
    # one unit of model_var per family: a group whose LRs have no seeds' scatter (one seed)
    # weighs its points per unit variance, the others by their scatter; the noise is pooled in
    # the units of the groups with seeds to compare, and gives the others no standard error
    units = any(s.seed_units and np.isfinite(s.deviations).sum() > 1 for s in fitted) or \
        (bool(fitted) and all(s.seed_units for s in fitted))
    fitted = [s for s in fitted if s.seed_units == units]
    dev = [s.deviations[np.isfinite(s.deviations)] for s in fitted]
    dev = [d - d.mean() if len(d) else d for d in dev]  # ~0 already: every seed, every LR
    df = sum(max(len(d) - 1, 0) for d in dev)
    if df >= MIN_NOISE_DF:
        # each width's deviations in units of its own design's variance (points inside the
        # window, how far they reach on each side): the noise is pooled, not the precision
        ss = sum((d**2).sum() / s.model_var for d, s in zip(dev, fitted) if len(d))
        return Noise(SEEDS, float(ss / df), df, seed_units=units)
    df_points = sum(s.df_points for s in fitted)
    if df_points >= MIN_NOISE_DF:
        # too few seeds for their pulls: each LR's scatter, the model's variance of v
        return Noise(POINTS, 1.0, df_points, seed_units=units)
    df_fit = sum(max(s.df_fit, 0) for s in fitted)
    if df_fit >= MIN_NOISE_DF and not any(len(d) > 1 for d in dev):
        rss = sum(s.rss for s in fitted if s.df_fit > 0)
        scale = sum(s.rss_scale for s in fitted if s.df_fit > 0)
        return Noise(FIT, float(rss / scale), df_fit, seed_units=units)
    if not fitted:
        return Noise("", math.nan, 0, "no width has a fitted optimum")
    if any(len(d) > 1 for d in dev):
        why = (f"the seeds' spread has {df} df over the family's widths (needs "
               f"{MIN_NOISE_DF}): add seeds or widths")
    else:
        why = (f"one seed, and the fits' residuals have {df_fit} df over the family's widths "
               f"(needs {MIN_NOISE_DF}): add seeds")
    return Noise("", math.nan, 0, why)


def t_interval(center: float, stderr: float, noise: Noise) -> tuple[float, float]:
    """center -/+ t(df) x stderr, NaNs without a standard error."""
    if not np.isfinite(stderr):
        return math.nan, math.nan
    half = noise.t * stderr
    return center - half, center + half
