"""The shape of real loss-vs-log2(LR) curves near their optimum, and what it does to lr*.

Issue 27's one-octave offset spread persists with 8 seeds (the seed-mean curve read through
4 offsets of a one-octave grid moves the parabola's vertex 0.15 octave on dense store B). Is
that the curve's shape (a parabola's vertex depends on which LRs exist when the curve is not a
parabola), and would a three-parameter curve of the right fixed shape remove it?

Per (store, parameterization, width), on the seed-mean curve (seed offsets removed, LRs every
seed ran, each point weighted by its precision, the seeds' variance floored at its median)
in a tricube window of W octaves moved to the fitted optimum until it stops:
  k   the linex c + A 2 (e^{kt} - 1 - kt) / k^2 (k > 0: steeper above lr*),
  r   the two-sided parabola c + A t^2 below, c + r A t^2 above,
  p   the power c + A |t|^p,
each the best of a grid of values. Then the spread of lr* over the offsets of half- and
one-octave sub-grids (whole, cut by an octave either side; as benchmarks/real_curves.py, at
8 seeds) for the parabola and fixed-k linexes, on the curve itself and on its smooth part (a
degree-6 polynomial through it): the smooth part's spread is what the shape alone causes.

With --search GRID_STORE[:SWEEP.yaml][@SEEDS] ... (search_targets.py's stores): per (family,
width), the parabola's optimum from the search's LRs (benchmarks/search_replay.py, the default
transfer search) minus that from every grid LR within 3.5 octaves, on the grid's seed-mean
curve and on its smooth part (a quartic through those LRs): is the search's gap the shape?
And the analysis's own lr* (real_curves.py's estimator) on the search's LRs with every seed
and on the search's trials, minus the grid's: the gap of its LR set and of its seeds.

    python benchmarks/curve_shape.py STORES/real_B STORES/real_C [--windows 1.5 2.5 3.5]
    python benchmarks/curve_shape.py --search STORES/grid_search_cpu STORES/real_B:B.yaml@0,1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))  # search_replay beside it

from real_curves import CUT, ESTIMATORS, INSIDE, SPACINGS  # noqa: E402
from search_replay import replay, store_spec  # noqa: E402
from shared_shape import linex  # noqa: E402

from mutransfer.analysis.fit import WINDOW_STEPS, tricube  # noqa: E402
from mutransfer.analysis_defaults import FIT_WINDOW  # noqa: E402
from mutransfer.results.store import Store  # noqa: E402

SHAPES = {
    "k": (linex, np.round(np.arange(-1.5, 3.01, 0.1), 2)),
    "r": (lambda t, r: np.where(t < 0, t * t, r * t * t),
          np.round(np.exp(np.arange(-1, 2.61, 0.1)), 2)),
    "p": (lambda t, p: np.abs(t) ** p, np.round(np.arange(1.0, 3.01, 0.1), 2)),
}
V_STEP = 0.005  # octaves: the optimum's grid


def curves(path: str):
    """(param, width, log2 LRs, seed-mean curve, its precision) of every cell of one store."""
    t = Store(path).tables().trials
    t = t[(t["status"].astype(str) == "complete") & ~t["diverged"].astype(bool)]
    for (par, width), g in t.groupby(["parameterization", "width"]):
        x, y, prec = mean_curve(g)
        yield par, int(width), x, y, prec


def fit(x, y, prec, window, shape, s, iterations=30) -> tuple[float, float]:
    """(optimum, weighted rss) of c + A shape(x - v, s), the tricube window moved to v."""
    v, rss = x[np.argmin(y)], np.inf
    for _ in range(iterations):
        w = tricube((x - v) / window) * prec
        vs = np.arange(v - window / 2, v + window / 2, V_STEP)
        g = shape(x[None, :] - vs[:, None], s)
        sw, s1, s2 = w.sum(), (w * g).sum(1), (w * g * g).sum(1)
        ty, tg = (w * y).sum(), (w * g * y).sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):  # degenerate windows: rss inf
            a = (sw * tg - s1 * ty) / (sw * s2 - s1 * s1)
            c = (ty - a * s1) / sw
            r = np.where(a > 0, (w * (y - c[:, None] - a[:, None] * g) ** 2).sum(1), np.inf)
        new = vs[np.argmin(r)]
        rss = float(r.min())
        if abs(new - v) < V_STEP:
            return float(new), rss
        v = new
    return float(v), rss


def best_shape(x, y, prec, window, name) -> tuple[float, float]:
    shape, values = SHAPES[name]
    fits = [(fit(x, y, prec, window, shape, s), s) for s in values]
    (v, _), s = min(fits, key=lambda f: f[0][1])
    return s, v


def spreads(x, y, prec, k) -> dict:
    """Mean offset spread of the k-linex optimum over the sub-grids of real_curves.py (its
    spacings, cut windows and INSIDE rule; the window as fit.grid_window's)."""
    shape = SHAPES["k"][0]
    q = np.round(x * 4).astype(int)
    cut = int(CUT * 4)
    dense, _ = fit(x, y, prec, FIT_WINDOW, shape, k)
    out = {}
    for spacing, step in SPACINGS.items():
        found = []
        for keep in (q == q, q >= q.min() + cut, q <= q.max() - cut):
            vs, inside = [], True
            for off in range(step):
                m = keep & (np.mod(q - off, step) == 0)
                inside &= bool(dense - x[m].min() >= INSIDE and x[m].max() - dense >= INSIDE)
                window = max(FIT_WINDOW, WINDOW_STEPS * step / 4)
                vs.append(fit(x[m], y[m], prec[m], window, shape, k)[0])
            if inside:
                found.append(max(vs) - min(vs))
        out[spacing] = float(np.mean(found)) if found else np.nan
    return out


def mean_curve(trials: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log2 LRs, seed-mean curve (seed offsets removed) and its precision, of one cell."""
    piv = trials.pivot_table(index="lr", columns="seed", values="final_eval_loss").dropna()
    y = piv.to_numpy()
    y = y - (y - y.mean(1, keepdims=True)).mean(0, keepdims=True)
    var = y.var(1, ddof=1) / y.shape[1]
    return np.log2(piv.index.to_numpy(float)), y.mean(1), 1 / np.maximum(var, np.median(var))


def search_gaps(spec: str) -> pd.DataFrame:
    """Per (family, width): the search's LRs' parabola optimum minus the grid's, real and smooth."""
    store, doc, seeds = store_spec(spec)
    grid = pd.DataFrame(replay(store, "grid", {"kind": "grid"}, seeds=seeds, doc=doc,
                               analysis=False).rows)
    ran = pd.DataFrame(replay(store, "search", {"kind": "transfer"}, seeds=seeds, doc=doc,
                              analysis=False).rows)
    analysed = {}
    keys = list(zip(grid["parameterization"], grid["width"], grid["lr"]))
    ran_lrs = set(zip(ran["parameterization"], ran["width"], ran["lr"]))
    ran_ids = set(ran["trial_id"].astype(str))
    for name, t in (("grid", grid), ("LRs", grid[[k in ran_lrs for k in keys]]),
                    ("trials", grid[grid["trial_id"].astype(str).isin(ran_ids)])):
        opt, _ = ESTIMATORS["new"](t)
        analysed[name] = dict(zip(zip(opt["parameterization"], opt["width"]), opt["log2_opt"]))
    grid = grid[~grid["diverged"].astype(bool)]
    parabola = SHAPES["k"][0]
    out = []
    for (par, width), g in grid.groupby(["parameterization", "width"]):
        x, y, prec = mean_curve(g)
        v, _ = fit(x, y, prec, FIT_WINDOW, parabola, 0.0)
        near = np.abs(x - v) <= 3.5
        x, y, prec = x[near], y[near], prec[near]
        mine = ran[(ran["parameterization"] == par) & (ran["width"] == width)]
        searched = np.isin(np.round(x, 6), np.round(np.log2(mine["lr"].astype(float)), 6))
        deg = min(4, len(x) - 2)  # an edge cell may hold only a few LRs
        smooth = np.polyval(np.polyfit(x - v, y, deg, w=np.sqrt(prec)), x - v)
        row = {"store": Path(str(store)).name, "cell": f"{par}/{width}", "grid LRs": len(x),
               "search LRs": int(searched.sum()),
               "search span": f"{x[searched].min() - v:+.2f}..{x[searched].max() - v:+.2f}"}
        for curve, yy in (("real", y), ("smooth", smooth)):
            whole, _ = fit(x, yy, prec, FIT_WINDOW, parabola, 0.0)
            part, _ = fit(x[searched], yy[searched], prec[searched], FIT_WINDOW, parabola, 0.0)
            row[f"gap {curve}"] = round(part - whole, 3)
        for name in ("LRs", "trials"):
            row[f"analysis: {name}"] = round(analysed[name][(par, width)]
                                             - analysed["grid"][(par, width)], 3)
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stores", nargs="*")
    ap.add_argument("--search", nargs="+", default=[], metavar="GRID_STORE")
    ap.add_argument("--windows", type=float, nargs="+", default=[1.5, 2.5, 3.5])
    ap.add_argument("--k", type=float, nargs="+", default=[0.0, -0.3, 0.3],
                    help="fixed asymmetries whose offset spread is measured (0: parabola)")
    ap.add_argument("--no-spread", action="store_true")
    args = ap.parse_args()
    pd.set_option("display.width", 220, "display.max_columns", 40)
    if args.search:
        gaps = pd.concat([search_gaps(spec) for spec in args.search], ignore_index=True)
        print("the search's lr* minus the grid's, the same parabola on the search's LRs and on "
              "every grid LR (octaves):")
        print(gaps.to_string(index=False))
        cols = ["gap real", "gap smooth", "analysis: LRs", "analysis: trials"]
        print(gaps.groupby("store")[cols].agg(lambda s: s.abs().max())
              .rename(columns=lambda c: f"max |{c}|").round(3).to_string())
        return
    shapes, spread = [], []
    for path in args.stores:
        store = path.rstrip("/").split("/")[-1]
        for par, width, x, y, prec in curves(path):
            row = {"store": store, "param": par, "width": width, "n_lr": len(x)}
            for window in args.windows:
                for name in SHAPES:
                    row[f"{name}@{window}"], row[f"v_{name}@{window}"] = best_shape(
                        x, y, prec, window, name)
            shapes.append(row)
            if args.no_spread:
                continue
            xc = (x - x.mean()) / x.std()
            smooth = np.polyval(np.polyfit(xc, y, 6, w=np.sqrt(prec)), xc)
            for curve, yy in (("real", y), ("smooth", smooth)):
                for k in args.k:
                    spread.append({"store": store, "param": par, "width": width,
                                   "curve": curve, "k": k, **spreads(x, yy, prec, k)})
    shapes = pd.DataFrame(shapes)
    print("best shape per cell (k: linex asymmetry, r: curvature above / below, p: power), "
          "by window half-width (octaves):")
    print(shapes[[c for c in shapes.columns if not c.startswith("v_")]].to_string(index=False))
    if spread:
        sp = pd.DataFrame(spread)
        print("\n8-seed offset spread of lr* (octaves), mean over cells and windows:")
        print(sp.groupby(["store", "curve", "k"])[["half", "octave"]].mean().unstack("curve")
              .round(3).to_string())
        print("\none-octave spread per cell:")
        print(sp.pivot_table(index=["store", "param", "width"], columns=["curve", "k"],
                             values="octave").round(3).to_string())


if __name__ == "__main__":
    main()
