"""The noise of each LR's mean loss: its own seeds' scatter, shrunk toward a smooth model.

Real seeds scatter far more at some LRs than at others: near the stability edge a few octaves
above the optimum their final losses spread several times wider than at the optimum (on the
dense quickstart stores, 9x at 2^-4.75 for sp width 64). A fit that weights every LR alike lets
such an LR set the curve's shape, and with it lr*. So each usable LR j gets the sample
variance s2_j of its seeds' seed-adjusted losses there (cells.py; n_j - 1 degrees of freedom),
which with few seeds is
itself very noisy (two seeds: one degree of freedom, a chi-square that is below a tenth of its
mean one time in four). It is shrunk toward a smooth model of log variance against the
distance from the argmin, one slope below and one above (the scatter grows away from the
optimum, faster towards instability):

    sigma2_j = ((n_j - 1) s2_j + PRIOR_DF m_j) / (n_j - 1 + PRIOR_DF)

(an inverse-chi-square prior of PRIOR_DF degrees of freedom centred on the model m_j: the
empirical-Bayes variance shrinkage of Smyth 2004, limma, with a fixed prior df). The fit weights
each LR by n_j / sigma2_j (the inverse variance of its mean), times its distance window.

The scatter and the model are read from the LRs inside lr*'s fit window only, the seeds'
offsets behind the scatter included (cells.restrict; optimum.py iterates the window and this
model until the window's LRs stop changing). Fitted over every LR, the model's two slopes and
the offsets carried the LRs outside the window into every weight inside it: leaving out only
LRs the fit gave zero weight moved lr* 0.04-0.12 octave on the search benchmark's grids
(benchmarks/search_floor.py). Read locally, an LR outside the window moves lr* only by being
the argmin or an edge of what trained (optimum.py), and on the dense real stores lr*'s spread
over grid offsets stayed within +0.009 octave of the global model's (benchmarks/README.md
"A local lr* estimator").

With one seed there is no scatter to measure: the fit weights by distance only (fit.py).
"""

from __future__ import annotations

import numpy as np

from mutransfer.analysis.cells import CellStats, SeedLrArrays, all_seeds, cell_stats, restrict
from mutransfer.analysis.fit import N_PARAMS, OptimumFit, model

PRIOR_DF = 4.0      # degrees of freedom of the smooth model, as a prior on each LR's variance
MIN_MODEL_LRS = 4   # LRs with a scatter needed to fit the model's two slopes (else: one level)
VAR_FLOOR = 1e-12   # loss^2: a floor for a seed scatter of exactly zero (identical losses)


def seed_residuals(arr: SeedLrArrays, stats: CellStats, usable: np.ndarray) -> np.ndarray:
    """(S, L) each seed's loss minus its offset minus the cell mean, NaN where it has none."""
    r = arr.seed_mean - stats.offsets[0][:, None] - stats.mean_loss[0][None, :]
    return np.where(usable[None, :] & (arr.n_loss > 0), r, np.nan)


def seed_scatter(arr: SeedLrArrays, stats: CellStats) -> tuple[np.ndarray, np.ndarray]:
    """((L,) variance of one seed's loss at each usable LR about the seed-adjusted mean (a
    seed that runs high everywhere is not noise), (L,) its degrees of freedom)."""
    usable = stats.usable[0]
    r = seed_residuals(arr, stats, usable)
    n = np.isfinite(r).sum(axis=0)
    df = np.maximum(n - 1, 0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = np.where(df > 0, np.nansum(r * r, axis=0) / df, np.nan)
    return s2, df


def smooth_model(x: np.ndarray, s2: np.ndarray, df: np.ndarray, centre: float) -> np.ndarray:
    """(L,) the model m_j: exp of a line in distance from `centre`, one slope on each side,
    fitted to log s2 by least squares weighted by each LR's df (a level alone with fewer than
    MIN_MODEL_LRS LRs, or a side with none)."""
    ok = (df > 0) & np.isfinite(s2)
    if not ok.any():
        return np.full(len(x), np.nan)
    y = np.log(np.maximum(s2[ok], VAR_FLOOR))
    below = np.maximum(centre - x, 0.0)
    above = np.maximum(x - centre, 0.0)
    cols = [np.ones(len(x))]
    if ok.sum() >= MIN_MODEL_LRS:
        cols += [c for c in (below, above) if (c[ok] > 0).sum() >= 2]
    design = np.stack(cols, axis=1)
    w = np.sqrt(df[ok])
    coef = np.linalg.lstsq(design[ok] * w[:, None], y * w, rcond=None)[0]
    # log s2 of a chi-square with df d sits below log of its mean by about 1/d: add it back
    bias = float((df[ok] * (1.0 / df[ok])).sum() / df[ok].sum())
    return np.exp(design @ coef + bias)


def point_variance(arr: SeedLrArrays, usable: np.ndarray, centre: float,
                   inside: np.ndarray) -> np.ndarray:
    """(L,) shrunk variance of one seed's loss at each `usable` LR (NaN elsewhere, and
    everywhere when no LR inside has two seeds), the scatter and the model read from the LRs
    `inside` (L,) only: a usable LR outside gets the model's value."""
    local = restrict(arr, inside)
    s2, df = seed_scatter(local, cell_stats(local, all_seeds(local)))
    model = smooth_model(arr.log2_lr, s2, df, centre)
    with np.errstate(invalid="ignore"):
        shrunk = (df * np.nan_to_num(s2) + PRIOR_DF * model) / (df + PRIOR_DF)
    return np.where(usable, np.maximum(shrunk, VAR_FLOOR), np.nan)


def lack_of_fit(log2_lr: np.ndarray, curve: np.ndarray, mean_var: np.ndarray,
                fit: OptimumFit) -> float:
    """tau^2: the variance of each LR's mean about the fitted curve beyond what its seeds'
    scatter explains (loss^2), from one fitted row (`fit`), its `curve` (L,) and the variance
    of each point's mean (L,).

    Real curves are rough at the 0.01-0.05 nats level: an LR can sit low or high in every seed
    alike (on the dense quickstart sweep, mup_ssm width 256, 2^-5.75 and 2^-4.75 lie 0.03-0.05
    below their neighbours, three seeds agreeing), which no seed's scatter shows. A grid that
    holds such an LR places lr* elsewhere than one shifted off it. So each point's mean is
    taken as the curve + its seeds' noise + an LR effect of variance tau^2, estimated by moments
    from the window's residuals as in random-effects meta-analysis (DerSimonian & Laird 1986):
    with w_j the fit's weights (window x 1 / e_j, e_j the seeds' variance of the mean) and
    Q = sum w_j r_j^2, tau^2 = (Q - (n - p)) / (sum w - sum w^2 / sum w), 0 when negative."""
    inside = fit.weights[0] > 0
    n, p = int(inside.sum()), N_PARAMS
    if not fit.fitted[0] or n <= p or not np.isfinite(mean_var[inside]).all():
        return 0.0
    x = np.asarray(log2_lr, float)
    r = curve[inside] - model(x, fit.params[:1])[0][inside]
    w = fit.weights[0][inside]
    q = float((w * r * r).sum())
    excess = (q - (n - p)) / float(w.sum() - (w * w).sum() / w.sum())
    return max(excess, 0.0)
