"""What sets the width of `mutransfer check`'s drift interval, and what would narrow it?

    python benchmarks/check_interval.py decompose CHECK_OUT/sweep [...]
    python benchmarks/check_interval.py placement DENSE_STORE [...]
    python benchmarks/check_interval.py seednoise DENSE_STORE [...]
    python benchmarks/check_interval.py replay CHECK_OUT/sweep@SEEDS [...]
    python benchmarks/check_interval.py mixed DENSE_STORE [...]
    python benchmarks/check_interval.py shared CHECK_OUT/sweep@SEEDS [...]
    python benchmarks/check_interval.py midpoints CHECK_OUT/sweep@SEEDS [...]

`decompose` reads stored check runs (no new trials) and splits the drift's 95% half-width into
its parts: per width, the standard error of log2 lr* from the data (the seeds' jackknife pooled
over the family, and the LRs' own effects: intervals.Noise.seed_stderr) and the grid's
placement term each lr* carries (intervals.grid_sd: 0.2 octave on a one-octave grid); for the
slope, sum c_w^2 (the widths' lever arm), the t quantile at the pooled df, and the half-width
as the widths' placement terms would give it (each independent: the interval before issue 29)
and as analysis/drift.py now gives it (one placement term for the slope, PLACEMENT_SD). Then
what other designs would reach, scaling the measured per-seed noise: seeds S (the seeds' part
of each se_w as sqrt(2 / S), df = widths x (S - 1)), one more width below (32), and the
trial-seconds each costs at the stored trials' mean wall time per width.

`placement` measures the slope's placement term on a dense store (quarter-octave LRs, 8 seeds):
every half- and one-octave sub-grid with all seeds, analysed as `analyze` does; the slope's
distance from the dense grid's (rms) is what another placement of the grid moves it by, seeds
held. Sub-grids with an optimum on their edge are left out; so are LRs not every seed ran.

`seednoise` measures what a finer grid does to the data's part of the interval: on every half-
and one-octave sub-grid of a dense store (and the store's own quarter-octave grid), one seed's sd
of log2 lr* per width (each seed fitted alone: the spread the seeds' jackknife estimates) and the
pooled drift's s.e. from the data with every seed, against the LRs each grid runs.

`replay` reads a stored check run's trials of the seeds named (`PATH@10,11`) as `check` reads
them and prints the drift, its interval and the equivalence verdict at check's default
tolerance (check_spec.TOLERANCE); under `estimator_variants.py` it gives a variant's verdicts
on the same trials.

`mixed` asks whether LRs added near the optimum (issue 29.2: "add seeds (and LRs near the
optimum)") would steady the drift of a one-octave grid: on a dense store, every disjoint pair
of seeds, each one-octave sub-grid alone and with the half-octave LRs within MIXED_OCTAVES of
the lr* that sub-grid gives (`analyze` on each), the slope's error from the dense 8-seed
slope (mean: the bias; rms), its interval's half-width and coverage.

`midpoints` reads a stored one-octave check resumed with `per_octave: 2` (its search added
half-octave LRs near each lr*) keeping the midpoints only at the widths up to W, for every W:
what those LRs buy at the narrow widths, where they cost least (issue 29.2).

`shared` reads a stored check run's seed set as `replay` does, and beside it the drift of
benchmarks/shared_shape.py's fit (one curvature, and asymmetry, for the family's widths), with
an interval as analysis/drift.py builds one: each width's seed jackknife of the joint fit
(every width refitted without one seed), the pooled df, and the same placement term.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutransfer.analysis.checkverdict import equivalence  # noqa: E402
from mutransfer.analysis.choice import resolve  # noqa: E402
from mutransfer.analysis.drift import PLACEMENT_SD, drift_table, slope_stderr  # noqa: E402
from mutransfer.analysis.groups import prepare  # noqa: E402
from mutransfer.analysis.intervals import grid_sd  # noqa: E402
from mutransfer.analysis.optimum import group_optima, optimum_tables  # noqa: E402
from mutransfer.analysis.tdist import t_quantile  # noqa: E402
from mutransfer.analysis_defaults import FIT_WINDOW  # noqa: E402
from mutransfer.commands.check_spec import TOLERANCE  # noqa: E402
from mutransfer.results.store import Store  # noqa: E402

LEVEL = 0.95
MIXED_OCTAVES = 1.0  # half-octave LRs this close to a one-octave grid's lr* are added
SPACINGS = {"half": 2, "octave": 4}  # quarter-octave steps per grid step


def read(path: str) -> pd.DataFrame:
    t = Store(path).tables().trials
    return t[t["status"].astype(str) != "failed"]


def read_seeds(spec: str) -> pd.DataFrame:
    """The trials of `PATH@SEEDS` (`PATH@10,11`): the seeds named, every seed without."""
    path, _, seeds = spec.partition("@")
    trials = read(path)
    if seeds:
        trials = trials[trials["seed"].isin([int(s) for s in seeds.split(",")])]
    return trials


def answers(trials: pd.DataFrame):
    prep = prepare(trials, resolve(trials, None, None, {}))
    optima = group_optima(prep, FIT_WINDOW)
    lr_opt, _ = optimum_tables(optima, prep.group_cols)
    return lr_opt, drift_table(lr_opt, optima, prep.family_cols), optima, prep.family_cols


def half(t: float, *parts: float) -> float:
    return t * math.sqrt(sum(p * p for p in parts))


def decompose(path: str) -> None:
    trials = read(path)
    _, drift, optima, cols = answers(trials)
    wall = trials.groupby("width")["wall_time_s"].mean()
    for _, d in drift.iterrows():
        members = [g for g in optima if list(g.key[:-1]) == [d[k] for k in cols]]
        x = np.log2([float(g.key[-1]) for g in members])
        seed_se = np.array([g.noise.seed_stderr(g.spread) for g in members])
        grid = np.array([grid_sd(g.spread.step) for g in members])
        noise = members[0].noise
        xc = x - x.mean()
        c2 = float(((xc / (xc**2).sum()) ** 2).sum())
        s_seed = slope_stderr(x, seed_se)
        s_grid_old = slope_stderr(x, grid)
        place = float(d["se_placement"])
        print(f"\n{path} · {[d[k] for k in cols]}: slope {d['slope']:+.3f}, "
              f"new interval [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}] (df {noise.df}, "
              f"t {noise.t:.3f})")
        print("| width | seeds | log2 lr* | s.e. from the data | grid placement (per width) "
              "| mean trial-s |")
        print("|---|---|---|---|---|---|")
        for g, s, gr in zip(members, seed_se, grid):
            print(f"| {g.key[-1]} | {g.spread.n_seeds} | {g.log2_opt:.2f} | {s:.3f} | {gr:.3f} "
                  f"| {wall.get(g.key[-1], math.nan):.1f} |")
        print(f"sum c_w^2 {c2:.3f}; slope s.e.: data {s_seed:.4f}, widths' placement terms "
              f"{s_grid_old:.4f} (old), slope's placement term {place:.4f} (new)")
        print(f"half-width old {half(noise.t, s_seed, s_grid_old):.3f} (placement share "
              f"{s_grid_old**2 / (s_seed**2 + s_grid_old**2):.0%}; at t=1.96 with no seed noise "
              f"{1.96 * s_grid_old:.3f}); new {half(noise.t, s_seed, place):.3f}")
        designs(x, seed_se, members, wall)


def designs(x: np.ndarray, seed_se: np.ndarray, members, wall: pd.Series) -> None:
    """Half-widths other designs would reach, from this run's per-seed noise."""
    n = np.array([g.spread.n_seeds for g in members], float)
    per_seed = float(np.sqrt(np.mean(seed_se**2 * n)))  # one seed's sd of log2 lr*, averaged
    lrs = members[-1].stats.usable[0].sum()
    print(f"one seed's sd of log2 lr* (rms over widths): {per_seed:.3f}; designs "
          f"(the same sd at every width, {lrs} LRs per width beyond the first):")
    print("| widths | seeds | df | t | s.e. data | placement | half-width | trial-s |")
    print("|---|---|---|---|---|---|---|---|")
    widths = [float(2**v) for v in x]
    for ws in (widths, [widths[0] / 2] + widths):
        xs = np.log2(ws)
        place = slope_stderr(xs, np.full(len(xs), PLACEMENT_SD))
        for s in (2, 4, 6, 8):
            df = len(ws) * (s - 1)
            t = t_quantile(LEVEL, df)
            data = slope_stderr(xs, np.full(len(xs), per_seed / math.sqrt(s)))
            cost = sum(wall.get(w, wall.iloc[0] / 2) * lrs * s for w in ws)
            print(f"| {int(ws[0])}-{int(ws[-1])} | {s} | {df} | {t:.3f} | {data:.4f} | "
                  f"{place:.4f} | {half(t, data, place):.3f} | {cost:.0f} |")


def every_seed(trials: pd.DataFrame) -> pd.DataFrame:
    """The cells every seed ran (a dense store's pilot LRs outside its window have fewer),
    as benchmarks/real_curves.py reads dense stores."""
    n = trials["seed"].nunique()
    return trials[trials.groupby(["parameterization", "width", "lr"])["seed"]
                  .transform("nunique") == n]


def placement(path: str) -> None:
    trials = every_seed(read(path))
    q = np.round(np.log2(trials["lr"].to_numpy(float)) * 4).astype(int)
    dense_opt, dense, _, _ = answers(trials)
    ref = dense.set_index("parameterization")["slope"]
    ref_opt = np.log2(dense_opt.set_index(["parameterization", "width"])["lr_opt"])
    rows = []
    for spacing, k in SPACINGS.items():
        for off in range(k):
            lr_opt, dr, optima, _ = answers(trials[(q - off) % k == 0])
            edged = {g.key[0] for g in optima if g.edge_side}
            per_width = np.log2(lr_opt.set_index(["parameterization", "width"])["lr_opt"]) \
                - ref_opt
            for _, r in dr.iterrows():
                p = r["parameterization"]
                if p in edged or not math.isfinite(r["slope"]):
                    continue
                rows.append({"spacing": spacing, "offset": off, "parameterization": p,
                             "slope": r["slope"], "error": r["slope"] - ref[p],
                             "width_errors": np.round(per_width.loc[p].to_numpy(), 3)})
    df = pd.DataFrame(rows)
    n_w = trials["width"].nunique()
    c = slope_stderr(np.log2(np.sort(trials["width"].unique()).astype(float)), np.ones(n_w))
    print(df.to_string(index=False))
    for name, g in [*df.groupby("spacing"), *df.groupby("parameterization"), ("all", df)]:
        rms = float(np.sqrt((g["error"] ** 2).mean()))
        each = np.concatenate(g["width_errors"].to_list())
        print(f"{name}: each width's lr* moved {np.sqrt((each**2).mean()):.3f} octave rms")
        print(f"{name}: {len(g)} sub-grids, slope error rms {rms:.3f} octave per doubling; "
              f"as an independent per-width term over {n_w} widths: {rms / c:.3f}")


def one_seed_sd(trials: pd.DataFrame) -> pd.DataFrame:
    """Per family and width: the sd over seeds of log2 lr* fitted from one seed alone."""
    rows = []
    for seed, t in trials.groupby("seed"):
        lr_opt, _, _, _ = answers(t)
        rows.append(lr_opt.assign(seed=seed, log2=np.log2(lr_opt["lr_opt"].to_numpy(float))))
    per = pd.concat(rows)
    return per.groupby(["parameterization", "width"])["log2"].std(ddof=1).unstack("width")


def seednoise(path: str) -> None:
    trials = every_seed(read(path))
    q = np.round(np.log2(trials["lr"].to_numpy(float)) * 4).astype(int)
    grids = [("quarter", 0, np.ones(len(trials), bool))]
    grids += [(spacing, off, (q - off) % k == 0) for spacing, k in SPACINGS.items()
              for off in range(k)]
    print("| grid | offset | family | LRs per width | one seed's sd of log2 lr*, by width "
          "| drift | s.e. data (all seeds) |")
    print("|---|---|---|---|---|---|---|")
    for spacing, off, keep in grids:
        sub = trials[keep]
        sd = one_seed_sd(sub)
        _, dr, _, _ = answers(sub)
        for _, r in dr.iterrows():
            p = r["parameterization"]
            n_lr = sub[sub["parameterization"] == p].groupby("width")["lr"].nunique().median()
            sds = " / ".join(f"{v:.3f}" for v in sd.loc[p].to_numpy())
            print(f"| {spacing} | {off} | {p} | {n_lr:.0f} | {sds} | {r['slope']:+.3f} | "
                  f"{r['se_seeds']:.3f} |")


def replay(spec: str) -> None:
    """The drift and the equivalence verdict `check` would give on a stored run's trials of
    the seeds named (`PATH@0,1,2,3`; every seed without): no new trials."""
    trials = read_seeds(spec)
    lr_opt, drift, _, _ = answers(trials)
    d = drift.iloc[0]
    lo, hi = float(d["ci_low"]), float(d["ci_high"])
    verdict = equivalence(lo, hi, TOLERANCE) or "INCONCLUSIVE"
    opts = " ".join(f"{v:+.2f}" for v in np.log2(lr_opt.sort_values("width")["lr_opt"]))
    print(f"{spec}: drift {d['slope']:+.3f} [{lo:+.3f}, {hi:+.3f}] (s.e. seeds "
          f"{d['se_seeds']:.3f}, placement {d['se_placement']:.3f}, df {d['ci_df']}) {verdict}; "
          f"{len(trials)} trials; log2 lr* by width {opts}")


def one_octave_with_near(trials: pd.DataFrame, q: np.ndarray, off: int) -> pd.DataFrame:
    """The one-octave sub-grid at `off` (quarter-octave steps), and the half-octave LRs within
    MIXED_OCTAVES of each width's lr* on it."""
    lr_opt, _, _, _ = answers(trials[(q - off) % 4 == 0])
    log2_opt = np.log2(lr_opt.set_index(["parameterization", "width"])["lr_opt"])
    centre = np.array([log2_opt.get(k, np.nan)
                       for k in zip(trials["parameterization"], trials["width"])])
    near = (np.abs(q / 4 - centre) <= MIXED_OCTAVES + 1e-9) & ((q - off) % 2 == 0)
    return trials[((q - off) % 4 == 0) | near]


def mixed(path: str) -> None:
    trials = every_seed(read(path))
    _, dense, _, _ = answers(trials)
    ref = dense.set_index("parameterization")["slope"]
    seeds = sorted(trials["seed"].unique())
    rows = []
    for pair in (seeds[i:i + 2] for i in range(0, len(seeds) - 1, 2)):
        ts = trials[trials["seed"].isin(pair)]
        q = np.round(np.log2(ts["lr"].to_numpy(float)) * 4).astype(int)
        for off in range(4):
            for kind, sub in (("one-octave", ts[(q - off) % 4 == 0]),
                              ("with near LRs", one_octave_with_near(ts, q, off))):
                _, dr, optima, _ = answers(sub)
                edged = {g.key[0] for g in optima if g.edge_side}
                rows += [{"grid": kind, "parameterization": r["parameterization"],
                          "error": r["slope"] - ref[r["parameterization"]],
                          "half": (r["ci_high"] - r["ci_low"]) / 2,
                          "covers": r["ci_low"] <= ref[r["parameterization"]] <= r["ci_high"],
                          "lrs": len(sub.groupby(["parameterization", "width", "lr"]))
                          / len(sub.groupby(["parameterization", "width"]))}
                         for _, r in dr.iterrows()
                         if r["parameterization"] not in edged and math.isfinite(r["slope"])]
    df = pd.DataFrame(rows)
    for (kind, p), g in df.groupby(["grid", "parameterization"]):
        print(f"{path} {kind} {p}: {len(g)} slopes, error mean {g['error'].mean():+.3f} rms "
              f"{np.sqrt((g['error'] ** 2).mean()):.3f}, half-width {g['half'].mean():.3f}, "
              f"coverage {g['covers'].mean():.2f}, LRs a width {g['lrs'].mean():.1f}")


def shared(spec: str) -> None:
    import shared_shape  # benchmarks/ (this script's folder is on sys.path when run)

    replay(spec)
    trials = read_seeds(spec)
    _, drift, _, _ = answers(trials)

    def per_width(t: pd.DataFrame) -> pd.Series:
        return shared_shape.answers(t)[0].set_index("width")["log2_opt"].sort_index()

    v = per_width(trials)
    x = np.log2(v.index.to_numpy(float))
    c = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    ss = sorted(trials["seed"].unique())
    jack = np.array([per_width(trials[trials["seed"] != s]).reindex(v.index).to_numpy()
                     for s in ss])
    var_w = (len(ss) - 1) / len(ss) * ((jack - jack.mean(0)) ** 2).sum(0)
    se = math.sqrt(float((c**2 * var_w).sum()))
    slope, df = float((c * v.to_numpy()).sum()), len(v) * (len(ss) - 1)
    h = t_quantile(LEVEL, df) * math.hypot(se, float(drift.iloc[0]["se_placement"]))
    verdict = equivalence(slope - h, slope + h, TOLERANCE) or "INCONCLUSIVE"
    print(f"  shared shape: drift {slope:+.3f} [{slope - h:+.3f}, {slope + h:+.3f}] (s.e. seeds "
          f"{se:.3f}, df {df}) {verdict}; log2 lr* by width "
          + " ".join(f"{u:+.2f}" for u in v))


def midpoints(spec: str) -> None:
    """A stored check whose LRs include midpoints of its grid (a one-octave run resumed with
    `per_octave: 2`), read with the midpoints kept only at the widths up to W, for W from none
    to all: the drift, its interval, the verdict and the trial-seconds of what is read."""
    trials = read_seeds(spec)
    log2 = np.log2(trials["lr"].to_numpy(float))
    on_grid = np.isclose(log2, np.round(log2))  # the one-octave grid's LRs
    for up_to in [0, *sorted(trials["width"].unique())]:
        t = trials[on_grid | (trials["width"] <= up_to).to_numpy()]
        _, drift, _, _ = answers(t)
        d = drift.iloc[0]
        lo, hi = float(d["ci_low"]), float(d["ci_high"])
        verdict = equivalence(lo, hi, TOLERANCE) or "INCONCLUSIVE"
        print(f"{spec} midpoints at widths <= {up_to}: drift {d['slope']:+.3f} [{lo:+.3f}, "
              f"{hi:+.3f}] {verdict}; {len(t)} trials, {t['wall_time_s'].sum():.0f} trial-s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["decompose", "placement", "seednoise", "replay", "mixed",
                                    "shared", "midpoints"])
    p.add_argument("stores", nargs="+")
    a = p.parse_args()
    run = {"decompose": decompose, "placement": placement, "seednoise": seednoise,
           "replay": replay, "mixed": mixed, "shared": shared, "midpoints": midpoints}[a.what]
    for s in a.stores:
        run(s)


if __name__ == "__main__":
    main()
