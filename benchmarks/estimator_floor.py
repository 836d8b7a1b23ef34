"""How far is lr*'s offset spread from its floor? An oracle that knows the curve's shape, and
the same readings on curves whose only noise is independent seed noise (issue 27).

Reads the sub-grids of benchmarks/real_curves.py (its spacings, cut windows, seed subsets and
INSIDE rule, by import) of a dense real store and, per (parameterization, width), estimates
lr* in ways that bound what any estimator could do:

real seeds (`real` rows)
  main         the analysis's estimator (real_curves.py's "new").
  oracle       lr* as the shift of a KNOWN template: the dense quarter-octave seed-mean curve of
               the OTHER seeds (cross-fitted: never the subset's own), smoothed by a local
               quadratic (tricube, half-width SMOOTH_BANDWIDTH octaves, each LR weighted by its
               precision) evaluated on a 1/64-octave grid and interpolated linearly, so a shift
               is continuous. Only a level and the shift are fitted (weighted least squares,
               each LR weighted by the template seeds' precision, the analysis's tricube window
               of fit.grid_window, moved to the optimum until it stops, as fit.fit_optimum).
               lr* = the template's argmin + the shift. With 8 seeds there are no other seeds:
               leave-half-out, lr* is the mean of two 4-seed estimates (seeds 0-3 against the
               template of 4-7, and 4-7 against 0-3).
  oracle_raw   the same with the template unsmoothed: the other seeds' quarter-octave mean,
               interpolated linearly. The LR-to-LR roughness that seeds share is in the
               template and the data alike and cancels; the template's own seed noise at each
               LR enters instead. oracle minus oracle_raw: what shared roughness costs when the
               shape is known.
  oracle_linex, oracle_parabola
               the template is the best linex (shared_shape.py's k grid and prior) or the best
               parabola through the other seeds' curve, in the window the sub-grid's spacing
               gives: what knowing two (one) numbers of the shape buys.
  parabola_oracle_weights
               the analysis's own parabola (fit.fit_optimum: level, curvature and location
               from the sub-grid) weighted by the other seeds' precision, as the oracle: what
               the oracle's weights alone buy.

synthetic seeds (`mean+noise`, `smooth+noise`, `mean`, `smooth` rows): every trial's loss is
replaced by the dense 8-seed mean curve at its LR (`mean`: its roughness kept) or its smooth
part (`smooth`: the oracle's smoother through it), plus independent Gaussian noise of each LR's
measured seed sd (8 seeds, seed offsets removed; +noise) or of a thousandth of it (no noise:
main still weighs each LR by its own variance). Each seed an independent draw, no seed
offsets; REPLICATES stores per noisy kind. Read by main and by the oracle whose template is the
smooth part itself (the shape exactly known).
  smooth+noise, oracle   the seed-noise floor: a perfect shape, iid seed noise only.
  mean, main             main's systematic part (shape and roughness, no seed noise).
  mean+noise, main       systematic + seed noise: does it reproduce main's real spread?
`smooth+seeds` rows: the smooth part plus each real seed's own deviation from the 8-seed mean
(real_seeds): the real seed noise, its LR-to-LR correlation kept, without shared roughness.

The mean spread of lr* over offsets (max |Δlog2| between offsets of one spacing; mean over
windows and seed subsets, then over cells) per (kind, estimator, spacing, seeds), as
real_curves.py's `spread_mean`; a grid counts only where main's dense 8-seed lr* lies >= INSIDE
octaves inside every offset's grid and main flags no edge (the same grids for every estimator
of one kind). Rows to OUT/estimator_floor_rows.csv.

    python benchmarks/estimator_floor.py STORES/real_B [more stores] [--real-only] [--out DIR]

(--real-only: the real seeds alone, no synthetic store; 1 minute a store against 3.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))  # real_curves and curve_shape beside it

import real_curves as rc  # noqa: E402
import shared_shape  # noqa: E402
from curve_shape import mean_curve  # noqa: E402

from mutransfer.analysis.fit import fit_optimum, grid_window, tricube  # noqa: E402
from mutransfer.results.store import Store  # noqa: E402

SMOOTH_BANDWIDTH = 1.0  # octaves: the template's local quadratic (tricube half-width)
FINE = 1 / 64           # octaves: the smooth template's grid
SHIFT_RANGE = 2.0       # octaves: the shift is searched within +-this of the template's argmin
SHIFT_STEP = 1 / 256    # octaves: its grid (refined by a parabola through the best three)
ITERATIONS = 30         # moves of the window to the optimum
HALVES = ((0, 1, 2, 3), (4, 5, 6, 7))  # leave-half-out at 8 seeds
REPLICATES = 2          # synthetic stores per noisy kind
QUIET = 1e-3            # the noise of a noise-free synthetic store, per unit seed sd
LOSS = "final_eval_loss"
LAGS = (1, 2, 4)        # quarter-octave steps between LRs whose seed deviations are correlated
KEYS = ["parameterization", "width"]


class Template:
    """A curve in log2 LR that can be read anywhere (linear interpolation, extrapolated
    linearly past its ends), its argmin, and the precision of each quarter-octave LR."""

    def __init__(self, x: np.ndarray, y: np.ndarray, precision: dict[int, float]):
        self.x, self.y, self.precision = x, y, precision
        self.argmin = float(x[np.argmin(y)])

    def __call__(self, t: np.ndarray) -> np.ndarray:
        x, y = self.x, self.y
        lo = y[0] + (t - x[0]) * (y[1] - y[0]) / (x[1] - x[0])
        hi = y[-1] + (t - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])
        return np.where(t < x[0], lo, np.where(t > x[-1], hi, np.interp(t, x, y)))


def local_quadratic(x: np.ndarray, y: np.ndarray, prec: np.ndarray, at: np.ndarray,
                    bandwidth: float = SMOOTH_BANDWIDTH) -> np.ndarray:
    """The precision- and tricube-weighted local quadratic through (x, y), read at `at`."""
    out = np.empty(len(at))
    for i, a in enumerate(at):
        w = tricube((x - a) / bandwidth) * prec
        u = x - a
        design = np.stack([np.ones_like(u), u, u * u], axis=1)
        sw = np.sqrt(w)
        out[i] = np.linalg.lstsq(design * sw[:, None], y * sw, rcond=None)[0][0]
    return out


def quarters(x: np.ndarray) -> np.ndarray:
    return np.round(x * 4).astype(int)


def template(cell: pd.DataFrame, seeds, smooth: bool | str, window: float = np.nan
             ) -> Template:
    """The template of `seeds`' trials of one cell: their seed-mean curve, smoothed (True),
    raw (False), "linex": the best linex of shared_shape.py (its k prior included) through it
    in a tricube `window` moved to its optimum, or "parabola": the best parabola so."""
    x, y, prec = mean_curve(cell[cell["seed"].isin(seeds)])
    precision = dict(zip(quarters(x), prec))
    if smooth in ("linex", "parabola"):
        ks = shared_shape.K_GRID if smooth == "linex" else [0.0]
        v, k, a = shared_shape.family_fit([x], [y], [prec], [window], [x[np.argmin(y)]], ks)
        fine = np.arange(x.min() - SHIFT_RANGE, x.max() + SHIFT_RANGE, FINE)
        return Template(fine, a * shared_shape.linex(fine - v[0], k), precision)
    if not smooth:
        return Template(x, y, precision)
    fine = np.arange(x.min(), x.max() + FINE / 2, FINE)
    return Template(fine, local_quadratic(x, y, prec, fine), precision)


def shift_fit(tmpl: Template, x: np.ndarray, y: np.ndarray, window: float) -> tuple[float, bool]:
    """(lr*, at the shift range's edge) of y(x) read as c + tmpl(x - shift): level and shift
    by weighted least squares, the tricube window moved to the optimum until it stops."""
    prec = np.array([tmpl.precision.get(q, 0.0) for q in quarters(x)])
    shifts = np.arange(-SHIFT_RANGE, SHIFT_RANGE + SHIFT_STEP / 2, SHIFT_STEP)
    resid = y[None, :] - tmpl(x[None, :] - shifts[:, None])  # (shifts, LRs)
    v = float(x[np.argmin(y)])
    best = 0
    for _ in range(ITERATIONS):
        w = tricube((x - v) / window) * prec
        c = (resid * w).sum(1) / w.sum()
        rss = ((resid - c[:, None]) ** 2 * w).sum(1)
        best = int(np.argmin(rss))
        step = 0.0
        if 0 < best < len(shifts) - 1:  # the parabola through the best three
            a, b, d = rss[best - 1:best + 2]
            if a - 2 * b + d > 0:
                step = 0.5 * (a - d) / (a - 2 * b + d) * SHIFT_STEP
        new = tmpl.argmin + shifts[best] + step
        if abs(new - v) < 1e-9:
            break
        v = new
    return v, best in (0, len(shifts) - 1)


def seed_mean(sub: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    piv = sub.pivot_table(index="lr", columns="seed", values=LOSS).dropna()
    return np.log2(piv.index.to_numpy(float)), piv.to_numpy().mean(1)


def oracle_answers(sub: pd.DataFrame, seeds, templates, halves: bool) -> pd.DataFrame:
    """lr* of every cell of one sub-grid by shift of `templates(cell, data seeds)`; with
    `halves` (cross-fitted templates) 8 seeds are read as two halves."""
    rows = []
    for (par, width), g in sub.groupby(KEYS):
        groups = [(h, h) for h in HALVES] if halves and len(seeds) == 8 else [(seeds, seeds)]
        found, edge = [], False
        for data_seeds, tmpl_key in groups:
            x, y = seed_mean(g[g["seed"].isin(data_seeds)])
            window = float(grid_window(x, y[None, :])[0])
            tmpl = templates((par, width), tmpl_key, window)
            v, at_edge = shift_fit(tmpl, x, y, window)
            found.append(v)
            edge |= at_edge
        rows.append({"parameterization": par, "width": width,
                     "log2_opt": float(np.mean(found)), "oracle_edge": edge})
    return pd.DataFrame(rows)


def weighted_parabola_answers(sub: pd.DataFrame, seeds, templates) -> pd.DataFrame:
    """lr* of every cell of one sub-grid by the analysis's own parabola (fit.fit_optimum, its
    window) with each LR weighted by the template seeds' precision instead of the sub-grid's
    own noise model: what the oracle's weights alone buy, without its shape. 8 seeds: the mean
    of the two HALVES, as the oracle."""
    rows = []
    for (par, width), g in sub.groupby(KEYS):
        found = []
        for data_seeds in (HALVES if len(seeds) == 8 else [seeds]):
            x, y = seed_mean(g[g["seed"].isin(data_seeds)])
            prec = np.array([templates((par, width), data_seeds, np.nan).precision.get(q, 0.0)
                             for q in quarters(x)])
            window = grid_window(x, y[None, :])
            with np.errstate(divide="ignore"):
                fitted = fit_optimum(x, y[None, :], window, point_var=1.0 / prec[None, :])
            found.append(float(fitted.log2_lr[0]))
        rows.append({"parameterization": par, "width": width,
                     "log2_opt": float(np.mean(found)), "oracle_edge": False})
    return pd.DataFrame(rows)


def cross_fitted(cells: dict, smooth: bool | str):
    """templates(cell, data seeds, window): the other seeds' template, cached."""
    cache = {}

    def get(cell, seeds, window):
        others = tuple(s for s in range(8) if s not in seeds)
        key = (cell, others, window if smooth in ("linex", "parabola") else None)
        if key not in cache:
            cache[key] = template(cells[cell], others, smooth, window)
        return cache[key]

    return get


def known(shapes: dict):
    """templates(cell, data seeds, window): the synthetic store's own smooth curve."""
    return lambda cell, seeds, window: shapes[cell]


def synthetic(trials: pd.DataFrame, smooth: bool, noise: float, rng) -> tuple[pd.DataFrame,
                                                                               dict]:
    """The store's trials with each loss replaced by the 8-seed mean curve (or its smooth
    part) at its LR plus N(0, (noise x the LR's seed sd)^2); and each cell's smooth template."""
    out, shapes = [], {}
    for cell, g in trials.groupby(KEYS):
        x, y, prec = mean_curve(g)
        piv = g.pivot_table(index="lr", columns="seed", values=LOSS).dropna()
        adj = piv.to_numpy()
        adj = adj - (adj - adj.mean(1, keepdims=True)).mean(0, keepdims=True)
        sd = dict(zip(quarters(x), adj.std(1, ddof=1)))
        shape = template(g, tuple(range(8)), smooth=True)
        shapes[cell] = shape
        curve = dict(zip(quarters(x), shape(x) if smooth else y))
        q = quarters(np.log2(g["lr"].to_numpy(float)))
        g = g[np.isin(q, list(curve))].copy()
        q = quarters(np.log2(g["lr"].to_numpy(float)))
        base = np.array([curve[k] for k in q])
        scale = np.array([sd[k] for k in q]) * noise
        g[LOSS] = base + scale * rng.standard_normal(len(g))
        out.append(g)
    return pd.concat(out, ignore_index=True), shapes


def real_seeds(trials: pd.DataFrame, n: int) -> tuple[pd.DataFrame, dict]:
    """The store's trials with each loss replaced by the smooth part of the 8-seed mean curve
    plus that seed's own deviation from the 8-seed mean (seed offset removed): the real seeds'
    noise, every LR-to-LR correlation of it kept, without the curve's shared roughness. The
    deviations of n of 8 seeds average to a variance (1 - n/8) / n of one seed's, so they are
    scaled by 1 / sqrt(1 - n/8); at n = 8 (no variance left) every seed gets half the
    difference of the two HALVES' mean deviations added (variance 1/8 of one seed's)."""
    out, shapes = [], {}
    for cell, g in trials.groupby(KEYS):
        piv = g.pivot_table(index="lr", columns="seed", values=LOSS).dropna()
        y = piv.to_numpy()
        y = y - (y - y.mean(1, keepdims=True)).mean(0, keepdims=True)
        dev = y - y.mean(1, keepdims=True)                      # (LRs, seeds)
        shape = template(g, tuple(range(8)), smooth=True)
        shapes[cell] = shape
        base = shape(np.log2(piv.index.to_numpy(float)))[:, None]
        if n < 8:
            noisy = base + dev / np.sqrt(1 - n / 8)
        else:
            cols = list(piv.columns)
            half = [dev[:, [cols.index(s) for s in h]].mean(1) for h in HALVES]
            noisy = base + dev + ((half[0] - half[1]) / 2)[:, None]
        value = pd.DataFrame(noisy, index=piv.index, columns=piv.columns).stack()
        g = g[g.set_index(["lr", "seed"]).index.isin(value.index)].copy()
        g[LOSS] = value.loc[list(zip(g["lr"], g["seed"]))].to_numpy()
        out.append(g)
    return pd.concat(out, ignore_index=True), shapes


def answer_rows(trials: pd.DataFrame, kind: str, estimators: dict,
                only: int | None = None) -> pd.DataFrame:
    """One row per (sub-grid, cell, estimator) with real_curves.summarize's columns (of the
    sub-grids of `only` seeds, else all); the edge flag of every estimator is main's (and the
    oracle's own range edge)."""
    rows = []
    for spacing, window, off, seeds, sub in rc.sub_grids(trials):
        if only is not None and len(seeds) != only:
            continue
        span = rc.span_of(sub)
        main, _ = rc.ESTIMATORS["new"](sub)
        main = main.set_index(KEYS)
        for est, f in estimators.items():
            ans = main[["log2_opt"]].assign(oracle_edge=False) if f is None else \
                f(sub, seeds).set_index(KEYS)
            for (par, width), r in ans.iterrows():
                s = span.loc[(par, width)]
                rows.append({"kind": kind, "est": est, "spacing": spacing, "window": window,
                             "offset": off, "n_seeds": len(seeds), "seeds": str(seeds),
                             "parameterization": par, "width": int(width),
                             "log2_opt": r["log2_opt"], "lo": np.nan, "hi": np.nan,
                             "edge": bool(main.loc[(par, width), "edge"] or r["oracle_edge"]),
                             "span_lo": s["min"], "span_hi": s["max"]})
    return pd.DataFrame(rows)


def run_store(path: str, rng, real_only: bool = False) -> pd.DataFrame:
    trials = Store(path).tables().trials
    trials = trials[(trials["status"].astype(str) == "complete")
                    & ~trials["diverged"].astype(bool)]
    trials = rc.complete_cells(trials)
    cells = {cell: g for cell, g in trials.groupby(KEYS)}
    dense, _ = rc.ESTIMATORS["new"](trials)
    ref = dense[KEYS + ["log2_opt"]].rename(columns={"log2_opt": "ref"})
    smooth, raw = cross_fitted(cells, True), cross_fitted(cells, False)
    lin, par = cross_fitted(cells, "linex"), cross_fitted(cells, "parabola")
    parts = [answer_rows(trials, "real", {
        "main": None,
        "oracle": lambda sub, seeds: oracle_answers(sub, seeds, smooth, True),
        "oracle_raw": lambda sub, seeds: oracle_answers(sub, seeds, raw, True),
        "oracle_linex": lambda sub, seeds: oracle_answers(sub, seeds, lin, True),
        "oracle_parabola": lambda sub, seeds: oracle_answers(sub, seeds, par, True),
        "parabola_oracle_weights": lambda sub, seeds: weighted_parabola_answers(sub, seeds,
                                                                                raw)})]
    if real_only:
        return pd.concat(parts, ignore_index=True).merge(ref, on=KEYS).assign(
            store=Path(path).name)
    for kind, curve_smooth, noise, reps in (
            ("mean", False, QUIET, 1), ("smooth", True, QUIET, 1),
            ("mean+noise", False, 1.0, REPLICATES), ("smooth+noise", True, 1.0, REPLICATES)):
        for rep in range(reps):
            fake, shapes = synthetic(trials, curve_smooth, noise, rng)
            tmpl = known(shapes)
            parts.append(answer_rows(fake, kind, {
                "main": None,
                "oracle": lambda sub, seeds, t=tmpl: oracle_answers(sub, seeds, t, False)}
            ).assign(seeds=lambda d, r=rep: d["seeds"] + f"#{r}"))
    for n in rc.SEED_SETS:
        fake, shapes = real_seeds(trials, n)
        tmpl = known(shapes)
        parts.append(answer_rows(fake, "smooth+seeds", {
            "main": None,
            "oracle": lambda sub, seeds, t=tmpl: oracle_answers(sub, seeds, t, False)}, n))
    rows = pd.concat(parts, ignore_index=True).merge(ref, on=KEYS)
    return rows.assign(store=Path(path).name)


def roughness(path: str) -> pd.DataFrame:
    """Per cell, within 2.5 octaves of the smooth part's argmin: the sd of the 8-seed mean
    about its smooth part, the sd its seed noise alone would give if independent from LR to LR
    (seed sd / sqrt 8), and the correlation of one seed's deviation from the 8-seed mean at
    LRs LAGS quarter-octaves apart (pooled over seeds and LRs; independent noise gives about
    -1/25 from the seed offsets removed)."""
    trials = rc.complete_cells(Store(path).tables().trials)
    out = []
    for (par, width), g in trials.groupby(KEYS):
        x, y, prec = mean_curve(g)
        piv = g.pivot_table(index="lr", columns="seed", values=LOSS).dropna().to_numpy()
        piv = piv - (piv - piv.mean(1, keepdims=True)).mean(0, keepdims=True)
        smooth = local_quadratic(x, y, prec, x)
        near = np.abs(x - x[np.argmin(smooth)]) <= 2.5
        dev = (piv - piv.mean(1, keepdims=True))[near]
        corr = {f"corr {lag / 4:g} oct": float((dev[:-lag] * dev[lag:]).sum()
                                               / np.sqrt((dev[:-lag] ** 2).sum()
                                                         * (dev[lag:] ** 2).sum()))
                for lag in LAGS}
        out.append({"store": Path(path).name, "parameterization": par, "width": width,
                    "resid_sd": float(np.std((y - smooth)[near])),
                    "noise_sd": float(np.sqrt(np.mean(piv.var(1, ddof=1)[near] / 8))),
                    **corr})
    return pd.DataFrame(out)


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean offset spread per (store, kind, est, spacing, n_seeds), over cells."""
    parts = []
    for kind, g in rows.groupby("kind"):
        s = rc.summarize(g.drop(columns="kind"), "log2_opt", KEYS)
        parts.append(s.assign(kind=kind))
    s = pd.concat(parts)
    return (s.groupby(["store", "kind", "est", "spacing", "n_seeds"])["spread_mean"].mean()
            .unstack("n_seeds").round(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=0, help="of the synthetic stores' noise")
    ap.add_argument("--real-only", action="store_true", help="no synthetic stores")
    args = ap.parse_args()
    pd.set_option("display.width", 200, "display.max_rows", 500)
    rng = np.random.default_rng(args.seed)
    rows = []
    for path in args.stores:
        start = time.perf_counter()
        rows.append(run_store(path, rng, args.real_only))
        print(f"{path}: {len(rows[-1])} lr* in {time.perf_counter() - start:.0f} s", flush=True)
    rows = pd.concat(rows, ignore_index=True)
    print("\nmean offset spread of lr* (octaves) by seeds:")
    print(table(rows).to_string())
    print("\nroughness of the 8-seed mean curve within 2.5 octaves of lr* (nats):")
    print(pd.concat([roughness(p) for p in args.stores]).round(4).to_string(index=False))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(out / "estimator_floor_rows.csv", index=False)


if __name__ == "__main__":
    main()
