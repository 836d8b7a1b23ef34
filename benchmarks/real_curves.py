"""lr* on real curves: does the answer stay put when the grid moves, and do its intervals know?

Reads dense real stores (benchmarks/real_curves_store.py: quarter-octave LRs, 8 seeds, sp and
mup_ssm, three widths) and, from each, every sub-grid a user might run:
  spacing  half-octave (2 offsets) and one-octave (4 offsets) steps of the quarter grid;
  window   the whole dense window, or cut short by one octave below, or above;
  seeds    2-, 3- and 4-seed subsets (four of each) and all 8.
Each sub-store is analysed as `analyze` does (prepare, group_optima, optimum and drift tables),
and by the estimator of eb4c8ec (benchmarks/real_curves_eb4c8ec.py) on the same trials.

Per (store, parameterization, width), for each estimator:
  spread   max - min of log2 lr* over the offsets of one spacing (same window, same seeds),
           where the dense optimum lies >= 1 octave inside every offset's grid;
  cross    the fraction of (offset, other offset) pairs whose answer lies inside the other's
           95% interval;
  cover    the fraction of intervals that hold the dense 8-seed lr* (that estimator's own, on
           the whole quarter-octave grid);
  half     the median interval half-width (octaves); `with` the fraction of sub-grids that got
           an interval.
The same for the drift slope per family. Figures go to stdout and to OUT/real_curves.csv.

  python benchmarks/real_curves.py STORES/real_A [more stores] --out DIR
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import pandas as pd
import real_curves_eb4c8ec as old
import shared_shape

from mutransfer.analysis.choice import resolve
from mutransfer.analysis.drift import drift_table
from mutransfer.analysis.groups import prepare
from mutransfer.analysis.intervals import LEVEL
from mutransfer.analysis.optimum import group_optima, optimum_tables
from mutransfer.analysis.tdist import t_quantile
from mutransfer.analysis_defaults import FIT_WINDOW
from mutransfer.results.store import Store

SPACINGS = {"half": 2, "octave": 4}  # quarter-octave steps per grid step
CUT = 1.0  # octaves a cut window loses on one side
SEED_SETS = {
    2: [(0, 1), (2, 3), (4, 5), (6, 7)],
    3: [(0, 1, 2), (3, 4, 5), (5, 6, 7), (1, 4, 7)],
    4: [(0, 1, 2, 3), (4, 5, 6, 7), (0, 2, 4, 6), (1, 3, 5, 7)],
    8: [tuple(range(8))],
}
INSIDE = 1.0  # octaves the dense optimum must lie inside a grid for its spread to count


def quarter(lr: pd.Series) -> np.ndarray:
    return np.round(np.log2(lr.to_numpy(float)) * 4).astype(int)


WINDOW = [FIT_WINDOW]  # the fit window the new estimator runs with (--window)


def new_answers(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    prep = prepare(trials, resolve(trials, None, None, {}))
    optima = group_optima(prep, WINDOW[0])
    lr_opt, _ = optimum_tables(optima, prep.group_cols)
    drift = drift_table(lr_opt, optima, prep.family_cols)
    opt = pd.DataFrame({
        "width": lr_opt["width"],
        "log2_opt": np.log2(lr_opt["lr_opt"]), "log2_lo": np.log2(lr_opt["ci_low"]),
        "log2_hi": np.log2(lr_opt["ci_high"]), "edge": lr_opt["edge"],
        "se_seeds": lr_opt["se_seeds_log2"], "step": lr_opt["grid_step"], "df": lr_opt["ci_df"],
        "tau_sd": [np.sqrt(g.spread.tau_var) for g in optima]})
    dr = pd.DataFrame({"slope": drift["slope"],
                       "lo": drift["ci_low"], "hi": drift["ci_high"],
                       "edge": drift["n_edge"] > 0, "se_seeds": drift["se_seeds"],
                       "se_place": drift["se_placement"], "df": drift["ci_df"]})
    return opt, dr


def old_answers(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return old.answers(prepare(trials, resolve(trials, None, None, {})))


def per_parameterization(f):
    """f on each parameterization's trials alone (a family never spans two), so a store
    holding one parameterization reads the same (it is then no axis of the analysis)."""
    def run(trials: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        opts, drifts = [], []
        for p, sub in trials.groupby("parameterization"):
            opt, dr = f(sub)
            opts.append(opt.assign(parameterization=p))
            drifts.append(dr.assign(parameterization=p))
        return pd.concat(opts, ignore_index=True), pd.concat(drifts, ignore_index=True)
    return run


ESTIMATORS = {"new": per_parameterization(new_answers),
              "eb4c8ec": per_parameterization(old_answers),
              "shared": per_parameterization(shared_shape.answers),  # --est only
              "shared_parabola": per_parameterization(
                  lambda trials: shared_shape.answers(trials, [0.0]))}  # --est only
DEFAULT_ESTIMATORS = ["new", "eb4c8ec"]


def sub_grids(trials: pd.DataFrame):
    """(spacing, window, offset, seeds, trials) of every sub-grid of one store."""
    q = quarter(trials["lr"])
    lo_hi = trials.assign(q=q).groupby(["parameterization", "width"])["q"].agg(["min", "max"])
    qlo = np.array([lo_hi.loc[(p, w), "min"] for p, w in zip(trials["parameterization"],
                                                              trials["width"])])
    qhi = np.array([lo_hi.loc[(p, w), "max"] for p, w in zip(trials["parameterization"],
                                                              trials["width"])])
    cut = int(CUT * 4)
    windows = {"full": np.ones(len(q), bool), "cut_low": q >= qlo + cut,
               "cut_high": q <= qhi - cut}
    for (name, step), (wname, wmask), n in itertools.product(SPACINGS.items(),
                                                             windows.items(), SEED_SETS):
        for seeds in [s for s in SEED_SETS[n] if set(s) <= set(trials["seed"])]:
            smask = trials["seed"].isin(seeds).to_numpy()
            for off in range(step):
                keep = wmask & smask & (np.mod(q - off, step) == 0)
                yield name, wname, off, seeds, trials[keep]


def complete_cells(trials: pd.DataFrame, min_lrs: int = 9) -> pd.DataFrame:
    """The LRs that every seed ran (the pilot's LRs outside the dense window have two seeds),
    in the (parameterization, width) groups that have at least `min_lrs` of them (a store
    still being filled holds some that have not)."""
    n_seeds = trials["seed"].nunique()
    keys = ["parameterization", "width", "lr"]
    full = trials.groupby(keys)["seed"].transform("nunique") == n_seeds
    trials = trials[full]
    n_lrs = trials.groupby(["parameterization", "width"])["lr"].transform("nunique")
    return trials[n_lrs >= min_lrs]


def span_of(trials: pd.DataFrame) -> pd.DataFrame:
    t = trials.assign(x=np.log2(trials["lr"].to_numpy(float)))
    return t.groupby(["parameterization", "width"])["x"].agg(["min", "max"])


def parts(row, names: tuple[str, ...]) -> dict:
    """The interval's parts of one answer (the new estimator's; NaN for eb4c8ec's), so that
    a placement term can be calibrated from the rows without refitting."""
    return {n: getattr(row, n, np.nan) for n in names}


def run_store(path: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    trials = (pd.read_parquet(path) if path.endswith(".parquet")
              else Store(path).tables().trials)
    trials = trials[trials["status"].astype(str) != "failed"]
    trials = complete_cells(trials)
    name = Path(path).name
    dense = {e: f(trials) for e, f in ESTIMATORS.items()}
    rows, drows = [], []
    for spacing, window, off, seeds, sub in sub_grids(trials):
        span = span_of(sub)
        for est, f in ESTIMATORS.items():
            opt, dr = f(sub)
            for r in opt.itertuples():
                s = span.loc[(r.parameterization, r.width)]
                rows.append({"store": name, "est": est, "spacing": spacing, "window": window,
                             "offset": off, "n_seeds": len(seeds), "seeds": str(seeds),
                             "parameterization": r.parameterization, "width": int(r.width),
                             "log2_opt": r.log2_opt, "lo": r.log2_lo, "hi": r.log2_hi,
                             "edge": bool(r.edge), "span_lo": s["min"], "span_hi": s["max"],
                             **parts(r, ("se_seeds", "step", "df", "tau_sd"))})
            for r in dr.itertuples():
                drows.append({"store": name, "est": est, "spacing": spacing, "window": window,
                              "offset": off, "n_seeds": len(seeds), "seeds": str(seeds),
                              "parameterization": r.parameterization, "slope": r.slope,
                              "lo": r.lo, "hi": r.hi, "edge": bool(r.edge),
                              **parts(r, ("se_seeds", "se_place", "df"))})
    return pd.DataFrame(rows), pd.DataFrame(drows), dense


def with_reference(rows: pd.DataFrame, dense: dict, value: str, keys: list[str]) -> pd.DataFrame:
    """Each row's reference: its estimator's answer on the dense 8-seed grid."""
    refs = []
    for est, (opt, dr) in dense.items():
        table = (opt.rename(columns={"log2_opt": "ref"}) if value == "log2_opt"
                 else dr.rename(columns={"slope": "ref"}))
        refs.append(table[keys + ["ref"]].assign(est=est))
    return rows.merge(pd.concat(refs), on=["est", *keys], how="left")


def marked(rows: pd.DataFrame, value: str) -> pd.DataFrame:
    """rows with `has` (an interval), `covers` (it holds the dense answer), `half` and
    `inside` (the dense optimum >= INSIDE octaves inside the sub-grid, no edge)."""
    rows = rows.reset_index(drop=True)  # rows of several stores repeat each other's index
    rows["has"] = np.isfinite(rows["lo"]) & np.isfinite(rows["hi"])
    rows["covers"] = (rows["lo"] <= rows["ref"]) & (rows["ref"] <= rows["hi"])
    rows["half"] = (rows["hi"] - rows["lo"]) / 2
    if value == "log2_opt":
        rows["inside"] = ((rows["ref"] - rows["span_lo"] >= INSIDE)
                          & (rows["span_hi"] - rows["ref"] >= INSIDE) & ~rows["edge"])
    else:
        rows["inside"] = ~rows["edge"]
    return rows


def per_grid(rows: pd.DataFrame, value: str, keys: list[str]) -> tuple[list, list]:
    """Per (store, est, keys, spacing, window, seeds) whose offsets all count: the spread of
    `value` over the offsets, and the fraction of offset pairs inside each other's interval."""
    grid_keys = ["store", "est", *keys, "spacing", "window", "n_seeds", "seeds"]
    spreads, cross = [], []
    for _, g in rows.groupby(grid_keys):
        if g["inside"].all() and len(g) > 1:
            v = g[value].to_numpy()
            spreads.append({**dict(zip(grid_keys, g.iloc[0][grid_keys])),
                            "spread": float(v.max() - v.min())})
            ok = g["has"].to_numpy()
            lo, hi = g["lo"].to_numpy(), g["hi"].to_numpy()
            pairs = [(lo[j] <= v[i] <= hi[j]) for i in range(len(v)) for j in range(len(v))
                     if i != j and ok[j]]
            if pairs:
                cross.append({**dict(zip(grid_keys, g.iloc[0][grid_keys])),
                              "cross": float(np.mean(pairs))})
    return spreads, cross


def summarize(rows: pd.DataFrame, value: str, keys: list[str]) -> pd.DataFrame:
    """Per (store, est, keys, spacing, n_seeds): spread over offsets, cross-coverage, coverage
    of the dense answer, half-width, fraction with an interval."""
    rows = marked(rows, value)
    spreads, cross = per_grid(rows, value, keys)
    sp = pd.DataFrame(spreads)
    cr = pd.DataFrame(cross)
    out_keys = ["store", "est", *keys, "spacing", "n_seeds"]
    base = rows.groupby(out_keys).agg(
        n=("has", "size"), with_ci=("has", "mean"),
        cover=("covers", lambda s: s[rows.loc[s.index, "has"]].mean()),
        half=("half", "median")).reset_index()
    if not sp.empty:
        agg = sp.groupby(out_keys)["spread"].agg(spread_mean="mean", spread_max="max",
                                                 n_spread="size").reset_index()
        base = base.merge(agg, on=out_keys, how="left")
    if not cr.empty:
        base = base.merge(cr.groupby(out_keys)["cross"].mean().reset_index(), on=out_keys,
                          how="left")
    return base


def overall(summary: pd.DataFrame) -> pd.DataFrame:
    """Over every cell: per (est, spacing, n_seeds) the mean and worst spread, the coverage
    and cross-coverage, the median half-width."""
    g = summary.groupby(["est", "spacing", "n_seeds"])
    return pd.DataFrame({
        "spread_mean": g["spread_mean"].mean(), "spread_max": g["spread_max"].max(),
        "cross": g["cross"].mean(), "cover": g.apply(
            lambda d: float((d["cover"] * d["n"] * d["with_ci"]).sum()
                            / (d["n"] * d["with_ci"]).sum()), include_groups=False),
        "with_ci": g["with_ci"].mean(), "half": g["half"].median()}).reset_index()


def side_by_side(summary: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per cell, each estimator's spread (mean over seed subsets), coverage and half-width
    next to each other, and whether the new one's spread is worse than eb4c8ec's. At the base
    width sp and mup_ssm are the same network (the same losses): both cells are listed."""
    cells = ["store", *keys, "spacing", "n_seeds"]
    wide = summary.pivot_table(index=cells, columns="est",
                               values=["spread_mean", "cover", "half"], dropna=False)
    wide = wide.dropna(how="all")  # the (store, cell) pairs no store holds
    wide.columns = [f"{v}_{e}" for v, e in wide.columns]
    if {"spread_mean_new", "spread_mean_eb4c8ec"} <= set(wide.columns):
        wide["worse"] = wide["spread_mean_new"] > wide["spread_mean_eb4c8ec"] + 1e-9
    if {"spread_mean_shared", "spread_mean_eb4c8ec"} <= set(wide.columns):
        wide["worse_shared"] = (wide["spread_mean_shared"]
                                > wide["spread_mean_eb4c8ec"] + 1e-9)
    return wide.reset_index()


def paired(rows: pd.DataFrame, value: str, keys: list[str], est: str = "new",
           base: str = "eb4c8ec") -> pd.DataFrame:
    """Per cell, `est`'s spread minus `base`'s on the same sub-grids (window and seed subset:
    a paired difference, n units), its mean and 95% t interval over the units. A cell whose
    interval lies above 0 is worse beyond what the choice of seeds and window explains; `worse`
    (side_by_side) compares the two means alone, which with 1-3 units at 8 seeds is a coin
    toss between estimators of equal spread. Units where either estimator's dense optimum is
    not inside every offset's grid are left out."""
    spreads, _ = per_grid(marked(rows, value), value, keys)
    sp = pd.DataFrame(spreads)
    cells = ["store", *keys, "spacing", "n_seeds"]
    wide = sp.pivot_table(index=[*cells, "window", "seeds"], columns="est",
                          values="spread").dropna(subset=[est, base])
    out = []
    for cell, g in (wide[est] - wide[base]).groupby(level=list(range(len(cells)))):
        d = g.to_numpy()
        t = t_quantile(LEVEL, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 \
            else np.inf
        out.append({**dict(zip(cells, cell)), "n": len(d), "diff": d.mean(),
                    "lo": d.mean() - t, "hi": d.mean() + t})
    out = pd.DataFrame(out)
    out["verdict"] = np.where(out["lo"] > 0, "worse", np.where(out["hi"] < 0, "better", ""))
    return out


def apply_settings(settings: list[str]) -> None:
    """MODULE.NAME=VALUE: set a numeric constant of mutransfer.analysis.MODULE (tuning)."""
    import importlib

    for item in settings:
        name, value = item.split("=")
        module, attr = name.rsplit(".", 1)
        mod = importlib.import_module(f"mutransfer.analysis.{module}")
        assert hasattr(mod, attr), item
        setattr(mod, attr, float(value))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stores", nargs="+")
    ap.add_argument("--out", default=None)
    ap.add_argument("--est", nargs="+", default=DEFAULT_ESTIMATORS, choices=list(ESTIMATORS))
    ap.add_argument("--set", nargs="*", default=[], help="MODULE.NAME=VALUE (tuning)")
    ap.add_argument("--window", type=float, default=FIT_WINDOW)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEED_SETS))
    args = ap.parse_args()
    apply_settings(args.set)
    WINDOW[0] = args.window
    for e in list(ESTIMATORS):
        if e not in args.est:
            del ESTIMATORS[e]
    for n in list(SEED_SETS):
        if n not in args.seeds and n != 8:
            del SEED_SETS[n]
    pd.set_option("display.width", 200, "display.max_rows", 500, "display.max_columns", 30)
    all_opt, all_drift = [], []
    for path in args.stores:
        start = time.perf_counter()
        rows, drows, dense = run_store(path)
        print(f"{path}: {len(rows)} lr* and {len(drows)} slopes in "
              f"{time.perf_counter() - start:.0f} s")
        for est, (opt, dr) in dense.items():
            print(f"dense 8-seed answers, {est}:")
            print(opt.round(3).to_string(index=False))
            print(dr.round(3).to_string(index=False))
        all_opt.append(with_reference(rows, dense, "log2_opt", ["parameterization", "width"]))
        all_drift.append(with_reference(drows, dense, "slope", ["parameterization"]))
    opt_rows, drift_rows = pd.concat(all_opt), pd.concat(all_drift)
    opt = summarize(opt_rows, "log2_opt", ["parameterization", "width"])
    drift = summarize(drift_rows, "slope", ["parameterization"])
    print("\nlr* per cell (octaves):")
    print(opt.round(3).to_string(index=False))
    print("\ndrift slope per family:")
    print(drift.round(3).to_string(index=False))
    if len(ESTIMATORS) > 1:
        print("\nlr* per cell, side by side:")
        print(side_by_side(opt, ["parameterization", "width"]).round(3).to_string(index=False))
        print("\ndrift per family, side by side:")
        print(side_by_side(drift, ["parameterization"]).round(3).to_string(index=False))
    if {"new", "eb4c8ec"} <= set(ESTIMATORS):
        for what, rows, value, keys in (
                ("lr*", opt_rows, "log2_opt", ["parameterization", "width"]),
                ("drift", drift_rows, "slope", ["parameterization"])):
            pairs = paired(rows, value, keys)
            print(f"\n{what} spread, new minus eb4c8ec on the same sub-grids (paired; 95% t "
                  "interval):")
            print(pairs[pairs["diff"] > 0].round(3).to_string(index=False))
            print(f"{len(pairs)} cells: new's mean spread higher in {(pairs['diff'] > 0).sum()}, "
                  f"significantly worse in {(pairs['verdict'] == 'worse').sum()}, "
                  f"significantly better in {(pairs['verdict'] == 'better').sum()}")
    print("\nlr*, over every cell:")
    print(overall(opt).round(3).to_string(index=False))
    print("\ndrift, over every family:")
    print(overall(drift).round(3).to_string(index=False))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        opt_rows.to_csv(out / "real_curves_rows.csv", index=False)
        drift_rows.to_csv(out / "real_curves_drift_rows.csv", index=False)
        opt.to_csv(out / "real_curves.csv", index=False)
        drift.to_csv(out / "real_curves_drift.csv", index=False)


if __name__ == "__main__":
    main()
