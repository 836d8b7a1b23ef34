"""Transfer search: a few LRs at each width, placed where the narrower widths say lr* is, and
run out only as far as the analysis's fit reads them.

A *family* is one parameterization and one value of every other axis but width, LR and seed;
its cells form a width x LR x seed grid. The search walks a family's widths upward, spending
where the answer is still uncertain and nowhere else:

- the smallest width knows nothing yet: it *scans* from the middle of the grid in steps of about
  an octave (SCAN_OCTAVES), walking towards the lower loss until the best LR has a higher one on
  each side (or the grid's end, or a diverged LR above it). The narrow widths are the cheap
  ones, so the walk is paid where trials cost least (`full_widths` runs the whole grid at that
  many of the smallest widths instead);
- each wider width predicts log2 lr* from the widths already settled (the drift fit: OLS of
  log2 lr* against log2 width, or the previous lr* when one width is settled) and first runs the
  `window` LRs of the grid nearest the prediction, more when the prediction's standard error
  spans more of the grid. A good prediction leaves only the fit's support to run; a poor one
  walks, one LR at a time, towards the optimum the width itself shows;
- a width is *settled* once every grid LR the analysis's fit would weigh has run: every LR
  within the *settle radius* (SETTLE_OCTAVES, 1.22 octaves) of the best LR and of the optimum
  fitted to what ran (a diverged LR, the grid's end, closes a side above: diverged counts as
  "too high"), and at least two usable LRs on each side inside the analysis's fit window
  (mutransfer/analysis/fit.py's grid_window on this family's grid). The LRs beyond the radius
  weigh little in the fit: the search's lr* came out within 0.04-0.14 octave of the grid's
  (benchmarks/README.md), and a width runs about twice the radius in LRs, whatever the grid's
  extent: the widest widths, which cost the most, run no more than that. `settle_octaves`
  sets the radius (2.5: every LR the analysis's window can weigh, lr* exactly the grid's);
- seeds are a second axis of cost (`seed_tolerance`): the smallest width's walk runs every
  seed; a wider width's first LRs (its window) run every seed, which measures the seeds'
  scatter, and every other LR runs one seed, and its others only where their absence could
  move the width's fitted lr* by more than the tolerance (influence_levels). An LR of fewer
  seeds is read at its seed-adjusted mean, as the analysis reads it (analysis/cells.py);
- with `probe_stability`, each settled width also runs upward from its best LR one step at a
  time until an LR diverges (or the grid ends), so the stability boundary is located. Its LRs
  lie above the fit's support (every LR inside it has run already): they barely move a fit.

Everything here is a pure function of the finished cells' outcomes (no Ray, no I/O): the same
results always give the same plan, which is what makes a search resumable (replaying the store
gives back where it was) and extendable (a new width opens its window; nothing else changes).
Cells are handed out a family's batch at a time (every cell its plan wants, the next batch
once this one has finished), so which cells run does not depend on how many run side by side
or in which order they finish: a real run on Ray runs the trials its replay runs. A run that
stopped in the middle of a batch resumes in that batch (resumed_batch replays the batches from
nothing on the stored results), so an interrupted search runs what one run through runs.
The Ray Tune searcher around it is mutransfer/sweep/search/transfer/searcher.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mutransfer.analysis.cells import SeedLrArrays, all_seeds, cell_stats  # downward
from mutransfer.analysis.fit import (  # the analysis's own estimator (downward)
    MIN_SIDE,
    fit_optimum,
    grid_window,
    vertex_sensitivity,
)
from mutransfer.analysis.pointnoise import seed_scatter  # downward
from mutransfer.analysis.slopes import ols
from mutransfer.analysis_defaults import FIT_WINDOW
from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.search.families import Family, families_of

# the settle radius (octaves): a width runs every grid LR this close to its best LR and to its
# fitted optimum. 1.22 is where a 1.5-octave tricube window (the analysis's on half-octave and
# finer grids when this was measured) weighs an LR a tenth of the optimum; replayed on three
# grids, the LRs beyond it moved lr* by <= 0.07 octave under that estimator and under
# today's wider-windowed parabola (>= 2.5 octaves, analysis/fit.py), while a radius that
# follows a 2.5-octave window (2.03) cost 48-73% of the grid's trial-seconds
# (benchmarks/README.md)
SETTLE_OCTAVES = 1.22
SCAN_OCTAVES = 1.0  # the first width's walk: steps of the grid nearest one octave
# seeds first run at an LR beyond a width's first ones (seed_tolerance): its others run only
# where their absence could move lr*
EDGE_SEEDS = 1


@dataclass(frozen=True)
class Outcome:
    """A finished cell: diverged, or trained to `loss` (the final eval loss)."""

    diverged: bool
    loss: float = math.nan

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> Outcome:
        """From a trials-table row or a trial's Tune result (status, diverged, final loss).
        A diverged trial's loss is never read: it may be its last finite one, or None."""
        diverged = bool(row.get("diverged")) or row.get("status") == "diverged"
        loss = row.get("final_eval_loss")
        finite = isinstance(loss, (int, float)) and math.isfinite(loss)
        return cls(diverged, float(loss) if finite and not diverged else math.nan)


# -- one width ---------------------------------------------------------------------------------

@dataclass
class LRStats:
    """Per LR of the grid at one width, as the analysis counts it: seeds finished (`n_ran`) of
    the LR's seeds (`n_seeds`), diverged (any seed that ran: such an LR never enters the fit),
    every seed that ran diverged, and the seed-adjusted mean loss of the seeds that ran (NaN
    where not usable; analysis/cells.py: each seed's loss minus its offset, so an LR run by
    fewer seeds is read on the level of the others)."""

    n_ran: np.ndarray
    n_seeds: np.ndarray
    diverged: np.ndarray
    all_diverged: np.ndarray
    loss: np.ndarray
    scatter: float = math.nan  # pooled variance of one seed's adjusted loss about its LR's mean

    @property
    def done(self) -> np.ndarray:
        """Run by at least one seed (the level a plan wants it at is the plan's)."""
        return self.n_ran > 0

    @property
    def partial(self) -> np.ndarray:
        """Run by some of its seeds, not every one."""
        return self.done & (self.n_ran < self.n_seeds)

    @property
    def usable(self) -> np.ndarray:
        return self.done & ~self.diverged & np.isfinite(self.loss)

    def argmin(self) -> int:
        """Index of the lowest usable mean loss; -1 when no LR trained."""
        if not self.usable.any():
            return -1
        return int(np.argmin(np.where(self.usable, self.loss, np.inf)))


def lr_stats(fam: Family, width: int, results: Mapping[str, Outcome]) -> LRStats:
    n_lrs, n_s = len(fam.lrs), len(fam.seeds)
    ran, div, loss = np.zeros((n_s, n_lrs)), np.zeros((n_s, n_lrs)), np.full((n_s, n_lrs), np.nan)
    n_seeds = np.zeros(n_lrs, int)
    for i in range(n_lrs):
        for s, seed in enumerate(fam.seeds):
            tid = fam.ids.get((width, i, seed))
            n_seeds[i] += tid is not None
            if tid is None or tid not in results:
                continue
            ran[s, i], div[s, i], loss[s, i] = 1.0, results[tid].diverged, results[tid].loss
    n_ran = ran.sum(axis=0).astype(int)
    diverged = div.sum(axis=0) > 0
    all_div = (n_ran > 0) & (div.sum(axis=0) == n_ran)
    # a trained seed without a finite loss leaves its LR out (as when every seed ran)
    lost = ((ran > 0) & (div == 0) & ~np.isfinite(loss)).any(axis=0)
    mean, scatter = seed_adjusted(ran, div, loss)
    mean = np.where((n_ran > 0) & ~diverged & ~lost, mean, np.nan)
    return LRStats(n_ran, n_seeds, diverged, all_div, mean, scatter)


def seed_adjusted(ran: np.ndarray, div: np.ndarray, loss: np.ndarray
                  ) -> tuple[np.ndarray, float]:
    """(L,) each LR's seed-adjusted mean loss from (S, L) arrays of one width, and the pooled
    variance of one seed's adjusted loss about it (NaN without an LR of two seeds), both as the
    analysis computes them (analysis/cells.py, pointnoise.seed_scatter: with every seed at every
    LR the mean is the plain mean)."""
    trained = (ran > 0) & (div == 0) & np.isfinite(loss)
    got = np.where(trained, loss, 0.0)
    arr = SeedLrArrays(np.arange(len(ran)), np.ones(ran.shape[1]), ran, div,
                       trained.astype(float), got, got * got)
    cs = cell_stats(arr, all_seeds(arr))
    s2, df = seed_scatter(arr, cs)
    has = df > 0
    scatter = float((df[has] * s2[has]).sum() / df[has].sum()) if has.any() else math.nan
    return cs.mean_loss[0], scatter


@dataclass(frozen=True)
class Prediction:
    """log2 lr* expected at a width, from the settled widths below it."""

    log2_lr: float
    stderr: float              # one standard error of the prediction; 0 below three widths
    slope: float               # drift per doubling of width; NaN from one width
    widths: tuple[int, ...]    # the widths it comes from


def predict(settled: list[tuple[int, float]], width: int) -> Prediction | None:
    """The drift fit over (width, log2 lr*) pairs with a finite lr*, evaluated at `width`;
    the previous lr* from one pair; None from none."""
    pts = [(w, y) for w, y in settled if math.isfinite(y)]
    if not pts:
        return None
    widths = tuple(w for w, _ in pts)
    if len(pts) == 1:
        return Prediction(pts[0][1], 0.0, math.nan, widths)
    x = np.log2(np.array(widths, dtype=float))
    y = np.array([v for _, v in pts])
    line = ols(x, y)
    x0 = math.log2(width)
    sxx = float(((x - x.mean()) ** 2).sum())
    # s.e. of the fitted line at x0: s * sqrt(1/n + (x0 - mean)^2 / Sxx), s = stderr * sqrt(Sxx)
    se = line.stderr * math.sqrt(sxx / len(x) + (x0 - x.mean()) ** 2) \
        if math.isfinite(line.stderr) else 0.0
    return Prediction(line.slope * x0 + line.intercept, se, line.slope, widths)


def window_around(log2_lrs: np.ndarray, pred: Prediction, size: int) -> tuple[int, int]:
    """The first window (inclusive LR indices): the `size` LRs nearest the prediction, and
    every LR within one standard error of it."""
    dist = np.abs(log2_lrs - pred.log2_lr)
    nearest = np.argsort(dist, kind="stable")[:size]
    within = np.flatnonzero(dist <= pred.stderr)
    chosen = np.concatenate([nearest, within])
    return int(chosen.min()), int(chosen.max())


def step_down(stats: LRStats, window: int) -> set[int]:
    """Nothing trained: the window was above the stable range; step down by a window."""
    lowest = int(np.flatnonzero(stats.done).min())
    return set(range(max(0, lowest - window), lowest))


def scan_steps(log2_lrs: np.ndarray) -> int:
    """Grid steps of the first width's walk: the count nearest SCAN_OCTAVES (at least one)."""
    if len(log2_lrs) < 2:
        return 1
    step = float(np.median(np.diff(log2_lrs)))
    return max(1, round(SCAN_OCTAVES / step))


def scan_start(n_lrs: int, steps: int) -> set[int]:
    """Where the walk starts: the grid's middle LR and one walking step either side of it."""
    mid = (n_lrs - 1) // 2
    return {min(n_lrs - 1, max(0, i)) for i in (mid - steps, mid, mid + steps)}


def scan_needs(stats: LRStats, steps: int) -> set[int]:
    """The walk's next LR: one walking step beyond the best LR on each side where nothing has
    run yet (towards the lower loss), until the best LR has a neighbour on both sides that
    ran (a higher loss, or a diverged LR above) or lies at the grid's end."""
    m = stats.argmin()
    if m < 0:
        return set()
    ran = np.flatnonzero(stats.done)
    n = len(stats.done)
    need = set()
    if m > 0 and not (ran < m).any():
        need.add(max(0, m - steps))
    if m < n - 1 and not (ran > m).any():
        need.add(min(n - 1, m + steps))
    return need


def fit_half_width(fam: Family) -> float:
    """The half-width of the analysis's fit window on this family's grid (octaves)."""
    x = fam.log2_lrs
    return float(grid_window(x, np.zeros((1, len(x))), FIT_WINDOW)[0])


def settle_radius(options: Search) -> float:
    """Octaves from the best LR and from the fitted optimum within which a width runs every
    grid LR before it settles: `settle_octaves`, else SETTLE_OCTAVES (on coarse grids the
    fit's two LRs a side, support_needs, reach further)."""
    return float(options.settle_octaves) if options.settle_octaves is not None \
        else SETTLE_OCTAVES


def support_needs(stats: LRStats, log2_lrs: np.ndarray, octaves: float = FIT_WINDOW,
                  half_width: float = FIT_WINDOW) -> set[int]:
    """Grid LRs not run yet that the analysis's fit could use: every LR less than `octaves`
    from the best LR (where the fit starts) or from the optimum fitted to what ran (where it
    ends), walking out from the best LR. Above it an LR where every seed diverged closes the
    side (nothing above it trains); below, diverged LRs are skipped (the fit skips them too).
    Past `octaves`, a side walks on inside the fit's window (`half_width` octaves) until it has
    MIN_SIDE usable LRs: with fewer, the parabola's rise on that side rests on one point (the
    analysis's note says so), so an LR it barely weighs still changes its fit's shape (a
    diverged LR next to the optimum leaves a side short). With `octaves` at the window, the
    fit on the search's cells is the fit on the grid's; below it, nearly so (the LRs left out
    weigh little)."""
    m = stats.argmin()
    if m < 0:
        return set()
    fitted = log2_optimum(stats, log2_lrs)
    centre = fitted if math.isfinite(fitted) else float(log2_lrs[m])
    ends = [log2_lrs[m], centre]
    lo, hi = min(ends) - octaves, max(ends) + octaves
    need: set[int] = set()
    for side in (-1, 1):
        i, usable = m + side, 0
        while 0 <= i < len(log2_lrs):
            x = log2_lrs[i]
            inside = lo < x < hi
            short = abs(x - centre) < half_width and usable < MIN_SIDE
            if not (inside or short):
                break
            if not stats.done[i]:
                need.add(i)
                if not inside:
                    break  # past the radius: one LR at a time, until the side has enough
            elif side > 0 and stats.all_diverged[i]:
                break
            elif stats.usable[i] and (x - centre) * side > 0:
                usable += 1
            i += side
    return need


def probe_needs(stats: LRStats) -> set[int]:
    """The next LR above the best one not run yet, until one diverged or the grid ends."""
    m = stats.argmin()
    if m < 0:
        return set()
    for i in range(m + 1, len(stats.done)):
        if not stats.done[i]:
            return {i}
        if stats.diverged[i]:
            break
    return set()


_FITS: dict[bytes, float] = {}  # the fit of a curve, by its points (plans are recomputed often)


def log2_optimum(stats: LRStats, log2_lrs: np.ndarray) -> float:
    """lr* as the analysis fits it (mutransfer/analysis/fit.py: its window on the LRs that
    ran, on the usable LRs' mean losses)."""
    if stats.argmin() < 0:
        return math.nan
    curve = np.where(stats.usable, stats.loss, np.nan)
    key = np.concatenate([np.asarray(log2_lrs, float), curve]).tobytes()
    if key not in _FITS:
        if len(_FITS) > 100_000:
            _FITS.clear()
        window = grid_window(log2_lrs, curve[None, :], FIT_WINDOW)
        _FITS[key] = float(fit_optimum(log2_lrs, curve[None, :], window).log2_lr[0])
    return _FITS[key]


@dataclass
class WidthPlan:
    """Where the search stands at one width of a family."""

    width: int
    full: bool                       # the whole grid (`full_widths`)
    prediction: Prediction | None    # None: the walk from the grid's middle (or the full grid)
    window: tuple[int, int]          # LR indices of the first window, inclusive
    wanted: set[int]                 # LR indices the search runs at this width (done or not)
    stats: LRStats
    settled: bool = False            # its fit's support has run: the next width starts
    log2_opt: float = math.nan       # once settled; NaN where no LR trained
    levels: np.ndarray | None = None  # seeds wanted at each LR (None: every seed)

    def missing(self, lr_index: int) -> int:
        """Seeds still to finish at a wanted LR for it to reach its level."""
        level = self.stats.n_seeds[lr_index] if self.levels is None else self.levels[lr_index]
        return max(0, int(level) - int(self.stats.n_ran[lr_index]))

    @property
    def to_finish(self) -> set[int]:
        return {i for i in self.wanted if self.missing(i) > 0}


def first_plan(fam: Family, width: int, stats: LRStats, options: Search,
               prediction: Prediction | None, full: bool) -> WidthPlan:
    """The LRs a width starts with: the whole grid, the walk's start, or the window."""
    n = len(fam.lrs)
    if full:
        return WidthPlan(width, True, None, (0, n - 1), set(range(n)), stats)
    if prediction is None:
        start = scan_start(n, scan_steps(fam.log2_lrs))
        return WidthPlan(width, False, None, (min(start), max(start)), start, stats)
    lo, hi = window_around(fam.log2_lrs, prediction, options.window)
    return WidthPlan(width, False, prediction, (lo, hi), set(range(lo, hi + 1)), stats)


def plan_width(fam: Family, width: int, results: Mapping[str, Outcome], options: Search,
               prediction: Prediction | None, full: bool = False) -> WidthPlan:
    stats = lr_stats(fam, width, results)
    log2_lrs = fam.log2_lrs
    plan = first_plan(fam, width, stats, options, prediction, full)
    # the smallest width (no prediction: it walks) runs every seed: it is the cheapest, and
    # with lr* read from the window's LRs only, one seed on its walk's far steps moved its
    # lr* by up to 0.23 octave (search_short, benchmarks/README.md "Seeds where they matter")
    if options.seed_tolerance is not None and not full and prediction is not None:
        first = set(range(plan.window[0], plan.window[1] + 1))
        plan.levels = influence_levels(stats, log2_lrs, first, options.seed_tolerance)
    # an LR some of whose seeds ran (it was wanted when they started) runs to its level: every
    # seed (without seed_tolerance, or where the seeds it lacks could move lr*), else one
    plan.wanted |= set(np.flatnonzero(stats.partial).tolist())
    if plan.to_finish:
        return plan  # the first LRs are not finished: what follows waits for all of them
    if stats.argmin() < 0:
        extra = step_down(stats, options.window)
    else:  # the walk (first width) until bracketed, then the fit's support
        extra = scan_needs(stats, scan_steps(log2_lrs)) if prediction is None else set()
        if not extra:
            extra = support_needs(stats, log2_lrs, settle_radius(options),
                                  fit_half_width(fam))
    plan.wanted |= extra
    if extra:
        return plan
    plan.settled = True
    plan.log2_opt = log2_optimum(stats, log2_lrs)
    if options.probe_stability:
        plan.wanted |= probe_needs(stats)
    return plan


def influence_levels(stats: LRStats, log2_lrs: np.ndarray, first: set[int],
                     tolerance: float) -> np.ndarray:
    """Seeds a width runs at each LR with `seed_tolerance`: every seed at its first LRs (the
    window: the seeds' scatter is measured there), EDGE_SEEDS elsewhere until the seeds it
    lacks could move the fitted optimum by more than `tolerance` octaves: |dv/dy_j| times the
    standard error the missing seeds leave in its mean (the pooled seed scatter)."""
    full = stats.n_seeds.copy()
    levels = np.minimum(full, EDGE_SEEDS)
    levels[sorted(first)] = full[sorted(first)]
    if stats.argmin() < 0 or not math.isfinite(stats.scatter):
        return levels  # the first LRs' seeds give the scatter, and the best LR
    lever = vertex_leverage(stats, log2_lrs)
    if lever is None:  # no vertex yet: which LRs matter is unknown, so every seed where it ran
        return np.where(stats.done, full, levels)
    with np.errstate(divide="ignore", invalid="ignore"):
        missing = np.sqrt(stats.scatter * np.clip(1.0 / np.maximum(stats.n_ran, 1)
                                                  - 1.0 / full, 0.0, None))
    return np.where(stats.done & (lever * missing > tolerance), full, levels)


def vertex_leverage(stats: LRStats, log2_lrs: np.ndarray) -> np.ndarray | None:
    """(L,) |dv/dy_j|: how far the fitted optimum moves per unit of LR j's mean loss (the
    analysis's fit.vertex_sensitivity); None where the fit has no vertex. Small next to the
    vertex and where the window weighs little, largest about an octave out."""
    curve = np.where(stats.usable, stats.loss, np.nan)[None, :]
    fit = fit_optimum(log2_lrs, curve, grid_window(log2_lrs, curve, FIT_WINDOW))
    sens = vertex_sensitivity(log2_lrs, fit)
    return None if sens is None else np.abs(sens)


def plan_family(fam: Family, results: Mapping[str, Outcome], options: Search) -> list[WidthPlan]:
    """The plan of each width reached so far: the widths up to the first unsettled one."""
    plans: list[WidthPlan] = []
    for j, width in enumerate(fam.widths):
        full = j < options.full_widths
        prediction = None if full else predict([(p.width, p.log2_opt) for p in plans], width)
        plan = plan_width(fam, width, results, options, prediction, full)
        plans.append(plan)
        if not plan.settled:
            break
    return plans


def family_wanted(fam: Family, plans: list[WidthPlan], results: Mapping[str, Any]) -> list[str]:
    """The family's cells its plans ask for and `results` lacks: at each LR still short of its
    level, its seeds in order, as many as the level lacks."""
    out = []
    for p in plans:
        for lr_index in sorted(p.to_finish):
            out += [t for t in fam.cell_ids(p.width, lr_index)
                    if t not in results][:p.missing(lr_index)]
    return out


def resumed_batch(fam: Family, options: Search, stored: Mapping[str, Outcome]
                  ) -> set[str] | None:
    """The batch a run of this family from an empty store was in when it stopped with the
    results `stored`: its batches replayed from nothing (each what the plan wants once those
    before it have finished) up to the first the store does not hold in full. None where the
    store holds a result of this family that no such run has (a grid's, a search's with other
    options): a batch then starts from every stored result.

    (Taking the plan of a store that stopped in the middle of a batch as a new batch started
    cells on part of that batch's results: a search interrupted and resumed ran other trials
    than one run through, up to 11 more and 5 fewer of ~100 on a noisy planted sweep.)"""
    ids = set(fam.ids.values())
    mine = {t: o for t, o in stored.items() if t in ids}
    known: dict[str, Outcome] = {}
    while True:
        batch = set(family_wanted(fam, plan_family(fam, known, options), known))
        if not batch or not batch <= mine.keys():
            break
        known.update({t: mine[t] for t in batch})
    return batch if mine.keys() <= known.keys() | batch else None


def family_done(fam: Family, plans: list[WidthPlan]) -> bool:
    return len(plans) == len(fam.widths) and all(p.settled and not p.to_finish for p in plans)


def walk_start_count(fam: Family) -> int:
    """LRs the walk starts with (scan_start): the grid's middle and a step either side."""
    return len(scan_start(len(fam.lrs), scan_steps(fam.log2_lrs)))


def least_cells(fam: Family, options: Search, per_width: int | None = None) -> int:
    """The fewest cells the search can run in this family: the full grid at its `full_widths`
    smallest widths, the walk's first LRs (at most three) at the smallest other width, and one
    first window at each wider one, or the walk's first LRs where that is fewer (a width
    below which nothing trained has nothing to predict from: it walks). With `per_width`,
    that many LRs at each width past the full ones instead (the typical count)."""
    n_full = min(options.full_widths, len(fam.widths))
    rest = len(fam.widths) - n_full
    if per_width is not None:
        return len(fam.seeds) * (n_full * len(fam.lrs) + rest * min(per_width, len(fam.lrs)))
    walk = walk_start_count(fam)
    per = min(options.window, len(fam.lrs), walk)
    first = walk if n_full == 0 else per
    return len(fam.seeds) * (n_full * len(fam.lrs) + (first + (rest - 1) * per if rest else 0))


def settle_count(fam: Family, options: Search) -> int:
    """LRs of the family's grid that a width whose optimum is an LR in the grid's middle runs
    when it is predicted well: its first window there, then what support_needs asks for on an
    exact bowl until it asks for nothing. (Counted from the radius and the two LRs a side
    alone, it said 5 LRs a width on a half-octave grid and 7 on a third-octave one where the
    search runs 7 and 9: with the window's next LR not run yet, a side walks one LR past the
    radius.)"""
    x = fam.log2_lrs
    mid = float(x[len(x) // 2])
    lo, hi = window_around(x, Prediction(mid, 0.0, math.nan, ()), options.window)
    ran = np.zeros(len(x), bool)
    ran[lo:hi + 1] = True
    none = np.zeros(len(x), bool)
    while True:
        stats = LRStats(ran.astype(int), np.ones(len(x), int), none, none,
                        np.where(ran, (x - mid) ** 2, np.nan))
        extra = support_needs(stats, x, settle_radius(options), fit_half_width(fam))
        if not extra:
            return int(ran.sum())
        ran[sorted(extra)] = True


# -- the whole sweep, with what is running ------------------------------------------------------

class TransferSearch:
    """Every family of a sweep and what is known of its cells: finished (with an outcome),
    running, or failed for good in this run. `next_trial` hands out cells to run, the widest
    first; a family whose wanted cell failed stops for this run (a re-run retries it)."""

    def __init__(self, families: list[Family], options: Search,
                 results: Mapping[str, Outcome] | None = None):
        self.families = families
        self.options = options
        self.results: dict[str, Outcome] = dict(results or {})
        self.running: set[str] = set()
        self.failed: set[str] = set()
        self.finished_here: set[str] = set()  # finished in this run (not replayed)
        self._plans: dict[int, list[WidthPlan]] | None = None
        self._reported: set[tuple[int, int, str]] = set()
        # each family's batch of cells (`to_run`); resumed, the one its stored results are in
        self._batches: dict[int, set[str]] = {
            i: batch for i, f in enumerate(families)
            if (batch := resumed_batch(f, options, self.results)) is not None}
        # trial id -> (family, width, LR index, the seed's place among the family's seeds)
        self._cell_of = {t: (i, w, lr_index, f.seeds.index(seed))
                         for i, f in enumerate(families)
                         for (w, lr_index, seed), t in f.ids.items()}

    @classmethod
    def of_cells(cls, cells: list[Cell], options: Search,
                 rows: Mapping[str, Mapping[str, Any]]) -> TransferSearch:
        """From a plan's cells and the store's finished rows by trial id (replayed)."""
        families = families_of(cells)
        ids = {c.trial_id for c in cells}
        results = {t: Outcome.of_row(r) for t, r in rows.items() if t in ids}
        return cls(families, options, results)

    # -- what to run ---------------------------------------------------------------------------
    def plans(self) -> dict[int, list[WidthPlan]]:
        if self._plans is None:
            self._plans = {i: plan_family(f, self.results, self.options)
                           for i, f in enumerate(self.families)}
        return self._plans

    def wanted_ids(self) -> list[str]:
        """Cells the search asks for now and has not run (failed ones excepted), in the order
        to start them. A family's widths run one after another, so the sweep ends when its
        longest chain does: first the cells a next width waits for (probes wait for nothing),
        of the family with the most widths still ahead; then the widest, as grids do."""
        out = [t for i, plans in self.plans().items()
               for t in family_wanted(self.families[i], plans, self.results)
               if t not in self.failed]
        return sorted(out, key=self._place)

    def _place(self, trial_id: str) -> tuple:
        """A cell's place in the order to start cells (`wanted_ids`), by its width's plan."""
        i, width, lr_index, seed = self._cell_of[trial_id]
        plans = self.plans()[i]
        settled = next((p.settled for p in plans if p.width == width), True)
        return (settled, len(plans), -width, i, lr_index, seed)

    def to_run(self) -> list[str]:
        """Cells to start now, in the order to start them: each family's batch, less what
        runs, ran or failed. A family's batch is every cell its plan wants, taken once the
        batch before it has finished, so the cells a search runs follow from the results
        alone, not from the order they came in. (Handing out what the plan wants whenever a
        worker was free started cells on part of a width's results that the rest would not
        have asked for: two runs of search_cpu with the same losses ran 122 and 124 trials,
        and one lr* moved 0.22 octave.)"""
        wanted: list[str] | None = None
        for i in range(len(self.families)):
            if all(t in self.results or t in self.failed for t in self._batches.get(i, ())):
                wanted = self.wanted_ids() if wanted is None else wanted
                self._batches[i] = {t for t in wanted if self._cell_of[t][0] == i}
        todo = [t for batch in self._batches.values() for t in batch
                if t not in self.results and t not in self.running and t not in self.failed]
        return sorted(todo, key=self._place)

    def next_trial(self) -> str | None:
        todo = self.to_run()
        if not todo:
            return None
        self.running.add(todo[0])
        return todo[0]

    @property
    def idle(self) -> bool:
        """Nothing running and nothing to start: the search is over (or blocked by failures)."""
        return not self.running and not self.to_run()

    def complete(self) -> bool:
        plans = self.plans()
        return all(family_done(f, plans[i]) for i, f in enumerate(self.families))

    # -- events ----------------------------------------------------------------------------------
    def finish(self, trial_id: str, outcome: Outcome) -> None:
        self.running.discard(trial_id)
        self.results[trial_id] = outcome
        self.finished_here.add(trial_id)
        self._plans = None

    def fail(self, trial_id: str) -> None:
        self.running.discard(trial_id)
        self.failed.add(trial_id)
        self._plans = None

    # -- counts ----------------------------------------------------------------------------------
    def started_count(self) -> int:
        """Cells started in this run: finished, failed or still running."""
        return len(self.finished_here) + len(self.failed) + len(self.running)

    def bounds(self) -> tuple[int, int, int]:
        """(least, typical, most) cells the whole search runs from nothing stored; typical:
        each optimum inside the grid, predicted well (every LR within `settle_octaves` of it)."""
        least = sum(least_cells(f, self.options) for f in self.families)
        typical = sum(least_cells(f, self.options, settle_count(f, self.options))
                      for f in self.families)
        return least, typical, sum(len(f.ids) for f in self.families)

    def expected(self) -> int:
        """Cells this run is known to need so far: finished, failed or running, wanted, and a
        first window at each width not reached yet (a lower bound; it grows as windows widen)."""
        n = self.started_count() + len(self.to_run())
        for i, plans in self.plans().items():
            fam = self.families[i]
            n += len(fam.seeds) * min(self.options.window, len(fam.lrs)) * \
                (len(fam.widths) - len(plans))
        return n

    def news(self) -> list[str]:
        """One line per width that settled or opened a window since the last call."""
        lines = []
        for i, plans in self.plans().items():
            fam = self.families[i]
            for p in plans:
                for event, happened in (("open", bool(p.wanted)), ("settled", p.settled)):
                    key = (i, p.width, event)
                    if happened and key not in self._reported:
                        self._reported.add(key)
                        lines.append(describe(fam, p, event))
        return lines


def fmt_log2(x: float) -> str:
    return "-" if not math.isfinite(x) else f"2^{x:.2f} ({2.0 ** x:.3g})"


def describe(fam: Family, p: WidthPlan, event: str) -> str:
    """A line for the sweep's log: a width opening its window, or settling."""
    head = f"{fam.label} width {p.width}"
    if event == "settled":
        ran, usable = int(p.stats.done.sum()), int(p.stats.usable.sum())
        left = (f" ({ran - usable} of them diverged or stopped early: not in the fit)"
                if usable < ran else "")
        return f"{head}: lr* {fmt_log2(p.log2_opt)} from {ran} of {len(fam.lrs)} LRs{left}"
    if p.full:
        return f"{head}: full grid of {len(fam.lrs)} LRs"
    pred = p.prediction
    if pred is None:
        lo, hi = p.window
        return (f"{head}: nothing to predict from; walks from {fam.lrs[lo]:.3g}..{fam.lrs[hi]:.3g}"
                f" towards the lower loss")
    lo, hi = p.window
    how = ("the lr* of width " + str(pred.widths[0]) if len(pred.widths) == 1 else
           f"drift {pred.slope:+.2f}/doubling over widths {','.join(map(str, pred.widths))}")
    return (f"{head}: predicted lr* {fmt_log2(pred.log2_lr)} +- {pred.stderr:.2f} octave "
            f"({how}); window {fam.lrs[lo]:.3g}..{fam.lrs[hi]:.3g} ({hi - lo + 1} LRs)")
