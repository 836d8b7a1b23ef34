"""Do one seed's lr* errors at different widths move together? (issue 29.2, the drift's s.e.)

    python benchmarks/check_seedcorr.py dense DENSE_STORE [...] [--out DIR]
    python benchmarks/check_seedcorr.py checks NAME=STORE[,STORE...] [...] [--out DIR]
    python benchmarks/check_seedcorr.py calib DENSE_STORE|NAME=STORE[,STORE...] [...] [--out DIR]

Every trial with seed s trains on the same batch stream (train.py: batch i from (seed, i))
and evaluates on the same batches (EVAL_SEED), whatever its width. If that makes one seed's
lr* error at one width predict its error at another (correlation rho), the drift's seed part
sum c_w^2 se_w^2 (analysis/drift.py, the widths counted independent) overstates the slope's
variance by about 1 / (1 - rho): sum c_w = 0.

Per family (one parameterization on one sub-grid, every seed), from `analyze`'s own numbers:
  pulls   each seed's jackknife pull on log2 lr* per width (GroupOptimum.spread.deviations);
          `r` their correlation between two widths (each width's pulls scaled to unit rms),
          pooled over the width pairs and families; `R` the slope's own jackknife variance
          (sum over seeds of (sum_w c_w pull_ws)^2) over the independent sum
          (sum_w c_w^2 sum_s pull_ws^2), pooled: 1 - rho where the widths are alike.
  alone   the same from each seed fitted alone (its lr* minus the seeds' mean at that width;
          a seed whose own optimum is on a grid edge at some width is left out).
Both with a 95% bootstrap interval over seeds (whole rows: a seed at every width together,
families resampled within themselves).

`dense` reads a dense store (quarter-octave LRs, 8 seeds: benchmarks/real_curves_store.py)
through its quarter grid and every half- and one-octave sub-grid (the LRs every seed ran, as
benchmarks/real_curves.py reads it), leaving out a family whose optimum is on a grid edge, and
then the direct test with disjoint seeds: on each sub-grid the slopes of two disjoint seed sets
(4+4: {0-3, 4-7}, {evens, odds}; 2+2: the four pairs 0-1 ... 6-7, each pair of pairs) differ by
the seeds alone (one grid: its placement and the LRs' own effects are common to both), so
z = (slope_a - slope_b) / hypot(se_seeds_a, se_seeds_b) should have mean square about 1 if the
seed part is right (a little above: t, not normal), and about 1 - rho if the widths' errors are
correlated; `inside t95` is the fraction with |z| below the 95% point of t at the pair's
smaller df.

`calib` measures the seed part's calibration per seed count k (2, 3, 4): every k-seed subset
of the seeds is analyzed alone, and over every pair of disjoint subsets on one grid (dense
stores: each half- and one-octave sub-grid; check runs: as they are, all widths and from the
second width, all the runs' seeds together) it compares the two answers' difference with
their seed parts (the placement is common to both): `inside` the fraction of pairs with
|a - b| <= t(df) hypot(se_a, se_b) (t at the smaller df, the pooled df `analyze` uses), and
`ratio` = mean (a - b)^2 / mean (se_a^2 + se_b^2), about 1 if the seed part is right, with a
95% chi-square interval on nu = sum over units (families, or family x width for lr*) of
floor(seeds / k) - 1, the df of one partition of the seeds into disjoint sets (the pairs
overlap; the dense sub-grids share seeds, so pooled over them the interval is too narrow).
Both for the slope (se_seeds) and for log2 lr* per width (se_seeds_log2).

`checks` reads stored `mutransfer check` runs (their sweep stores; several stores of one model
concatenated by commas, e.g. the three Mamba runs' seeds 0-5, 10-11, 20-21), all seeds, over
every width and over the widths from the second on, and does the same (pulls, alone), then the
disjoint test over the runs' 2-seed sets.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from check_interval import SPACINGS, answers, every_seed, read  # noqa: E402

from mutransfer.analysis.tdist import t_quantile  # noqa: E402

LEVEL = 0.95
BOOT = 2000
RNG = np.random.default_rng(29)


def coefs(widths: np.ndarray) -> np.ndarray:
    x = np.log2(widths.astype(float))
    xc = x - x.mean()
    return xc / (xc**2).sum()


def pull_matrices(trials: pd.DataFrame) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per family without an edge optimum: (name, widths, (S, W) pulls, seeds as rows)."""
    _, _, optima, cols = answers(trials)
    fams: dict[tuple, list] = {}
    for g in optima:
        fams.setdefault(tuple(g.key[:-1]), []).append(g)
    out = []
    for key, members in fams.items():
        if any(g.edge_side for g in members):
            continue
        seeds = sorted(set.intersection(*[set(g.arrays.seeds.tolist()) for g in members]))
        mat = np.array([[g.spread.deviations[list(g.arrays.seeds).index(s)] for g in members]
                        for s in seeds])
        if np.isfinite(mat).all():
            out.append((str(key), np.array([g.key[-1] for g in members]), mat))
    return out


def alone_matrices(trials: pd.DataFrame) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Per family: (name, widths, (S, W) each seed's own lr* less the seeds' mean)."""
    rows = []
    for seed, t in trials.groupby("seed"):
        lr_opt, _, _, cols = answers(t)
        rows.append(lr_opt.assign(seed=seed, log2=np.log2(lr_opt["lr_opt"].to_numpy(float))))
    per = pd.concat(rows)
    out = []
    for key, f in per.groupby(cols):
        mat = f.pivot(index="seed", columns="width", values="log2")
        edge = f.pivot(index="seed", columns="width", values="edge").fillna(True)
        mat = mat[~(edge.astype(bool).any(axis=1) | mat.isna().any(axis=1))]
        if len(mat) < 2:
            continue
        m = mat.to_numpy(float)
        out.append((str(key), mat.columns.to_numpy(), m - m.mean(axis=0)))
    return out


def stats(mats: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(pooled r, pooled R) over families: mats = [(widths, (S, W) deviations)]."""
    num_r = den_r = num_v = den_v = 0.0
    for widths, m in mats:
        u = m / np.sqrt((m**2).mean(axis=0))
        for a, b in itertools.combinations(range(m.shape[1]), 2):
            num_r += (u[:, a] * u[:, b]).sum()
            den_r += len(u)
        c = coefs(widths)
        num_v += ((m @ c) ** 2).sum()
        den_v += ((m**2) @ (c**2)).sum()
    return num_r / den_r, num_v / den_v


def with_boot(mats: list[tuple[np.ndarray, np.ndarray]]) -> str:
    r, v = stats(mats)
    boots = []
    for _ in range(BOOT):
        boots.append(stats([(w, m[RNG.integers(0, len(m), len(m))]) for w, m in mats]))
    b = np.array(boots)
    lo, hi = np.nanpercentile(b, [2.5, 97.5], axis=0)
    n = sum(len(m) for _, m in mats)
    return (f"r {r:+.3f} [{lo[0]:+.3f}, {hi[0]:+.3f}], R {v:.3f} [{lo[1]:.3f}, {hi[1]:.3f}] "
            f"({len(mats)} families, {n} seed rows)")


def report(name: str, pulls: list, alone: list) -> None:
    for what, mats in (("pulls", pulls), ("alone", alone)):
        text = with_boot([(w, m) for _, w, m in mats]) if mats else "no family without an edge"
        print(f"{name}: {what} {text}")


def sub_grids(trials: pd.DataFrame):
    q = np.round(np.log2(trials["lr"].to_numpy(float)) * 4).astype(int)
    yield "quarter", 0, trials
    for spacing, k in SPACINGS.items():
        for off in range(k):
            yield spacing, off, trials[(q - off) % k == 0]


def slope_rows(trials: pd.DataFrame, seeds: tuple) -> pd.DataFrame:
    _, dr, optima, cols = answers(trials[trials["seed"].isin(seeds)])
    edged = {tuple(g.key[:-1]) for g in optima if g.edge_side}
    dr = dr[[tuple(k) not in edged for k in dr[cols].itertuples(index=False)]]
    return dr.assign(family=[str(tuple(k)) for k in dr[cols].itertuples(index=False)])


DISJOINT = [((0, 1, 2, 3), (4, 5, 6, 7)), ((0, 2, 4, 6), (1, 3, 5, 7))]
DISJOINT += list(itertools.combinations([(0, 1), (2, 3), (4, 5), (6, 7)], 2))


def disjoint_z(trials: pd.DataFrame, pairs, label: str) -> list[dict]:
    cache: dict[tuple, pd.DataFrame] = {}
    rows = []
    for a, b in pairs:
        for s in (a, b):
            if s not in cache:
                cache[s] = slope_rows(trials, s).set_index("family")
        ra, rb = cache[a], cache[b]
        for fam in ra.index.intersection(rb.index):
            x, y = ra.loc[fam], rb.loc[fam]
            if not (np.isfinite(x["se_seeds"]) and np.isfinite(y["se_seeds"])):
                continue
            z = (x["slope"] - y["slope"]) / math.hypot(x["se_seeds"], y["se_seeds"])
            df = int(min(x["ci_df"], y["ci_df"]))
            rows.append({"grid": label, "family": fam, "n_seeds": len(a), "a": a, "b": b,
                         "diff": x["slope"] - y["slope"], "z": z, "df": df,
                         "inside": abs(z) <= t_quantile(LEVEL, df)})
    return rows


def z_summary(df: pd.DataFrame, by: list[str]) -> None:
    for key, g in df.groupby(by):
        print(f"  {key}: {len(g)} pairs, mean z^2 {(g['z'] ** 2).mean():.3f}, "
              f"rms diff {np.sqrt((g['diff'] ** 2).mean()):.3f}, inside t95 "
              f"{g['inside'].mean():.3f}")


def dense(path: str, out: Path) -> None:
    trials = every_seed(read(path))
    name = Path(path).name
    all_p, all_a, zrows = [], [], []
    for spacing, off, sub in sub_grids(trials):
        p, a = pull_matrices(sub), alone_matrices(sub)
        report(f"{name} {spacing} {off}", p, a)
        all_p += p
        all_a += a
        zrows += disjoint_z(sub, DISJOINT, f"{spacing} {off}")
    # sub-grids share seeds: the pooled interval is too narrow; the per-grid lines say more
    report(f"{name} every sub-grid pooled", all_p, all_a)
    z = pd.DataFrame(zrows)
    z.to_csv(out / f"seedcorr_{name}.csv", index=False)
    print(f"{name}: disjoint seed sets, z = slope difference / hypot(se_seeds)")
    z_summary(z.assign(spacing=z["grid"].str.split().str[0]), ["n_seeds", "spacing"])
    z_summary(z, ["n_seeds", "family"])


def checks(spec: str, out: Path) -> None:
    name, paths = spec.split("=", 1)
    trials = pd.concat([read(p) for p in paths.split(",")], ignore_index=True)
    widths = np.sort(trials["width"].unique())
    for lo in (widths[0], widths[1]):
        sub = trials[trials["width"] >= lo]
        report(f"{name} {lo}-{widths[-1]}", pull_matrices(sub), alone_matrices(sub))
        seeds = sorted(sub["seed"].unique())
        sets = [tuple(seeds[i:i + 2]) for i in range(0, len(seeds) - 1, 2)]
        z = pd.DataFrame(disjoint_z(sub, list(itertools.combinations(sets, 2)), "stored"))
        if len(z):
            z.to_csv(out / f"disjoint_{name}_{lo}-{widths[-1]}.csv", index=False)
            print(f"{name} {lo}-{widths[-1]}: disjoint 2-seed sets")
            z_summary(z, ["n_seeds"])


def answers_of(trials: pd.DataFrame, seeds: tuple) -> list[dict]:
    """One seed set's answers on one grid: the slope per family, log2 lr* per family x width,
    each with its seed part and df; families (slope) or widths (lr*) on an edge left out."""
    lr_opt, _, optima, cols = answers(trials[trials["seed"].isin(seeds)])
    out = [{"what": "slope", "unit": r["family"], "value": r["slope"], "se": r["se_seeds"],
            "df": r["ci_df"]} for _, r in slope_rows(trials, seeds).iterrows()]
    for _, r in lr_opt[~lr_opt["edge"].astype(bool)].iterrows():
        out.append({"what": "lr*", "unit": str((*[r[c] for c in cols], r["width"])),
                    "value": math.log2(r["lr_opt"]), "se": r["se_seeds_log2"],
                    "df": r["ci_df"]})
    return [o for o in out if np.isfinite(o["value"]) and np.isfinite(o["se"])]


def calib_pairs(trials: pd.DataFrame, label: str, k: int) -> list[dict]:
    seeds = sorted(trials["seed"].unique())
    subsets = list(itertools.combinations(seeds, k))
    got = {s: {(o["what"], o["unit"]): o for o in answers_of(trials, s)} for s in subsets}
    rows = []
    for a, b in itertools.combinations(subsets, 2):
        if set(a) & set(b):
            continue
        for key in got[a].keys() & got[b].keys():
            x, y = got[a][key], got[b][key]
            claimed = x["se"] ** 2 + y["se"] ** 2
            df = int(min(x["df"], y["df"]))
            rows.append({"grid": label, "k": k, "what": key[0], "unit": key[1], "df": df,
                         "a": "-".join(map(str, a)), "b": "-".join(map(str, b)),
                         "sq": (x["value"] - y["value"]) ** 2, "claimed": claimed,
                         "inside": abs(x["value"] - y["value"])
                         <= t_quantile(LEVEL, df) * math.sqrt(claimed),
                         "nu": len(seeds) // k - 1})
    return rows


def chi2_ratio_interval(ratio: float, nu: int) -> tuple[float, float]:
    """95% interval on a variance ratio estimated with nu df (chi-square, by simulation)."""
    q = np.percentile(RNG.chisquare(nu, 200_000), [97.5, 2.5])
    return ratio * nu / q[0], ratio * nu / q[1]


def calib_summary(df: pd.DataFrame, by: list[str]) -> None:
    for key, g in df.groupby(by):
        ratio = g["sq"].mean() / g["claimed"].mean()
        nu = int(g.drop_duplicates(["grid", "unit"])["nu"].sum())
        lo, hi = chi2_ratio_interval(ratio, nu) if nu > 0 else (math.nan, math.nan)
        dfs = "/".join(str(d) for d in sorted(g["df"].unique()))
        print(f"  {key}: {len(g)} pairs, inside t95 {g['inside'].mean():.3f}, ratio "
              f"{ratio:.2f} [{lo:.2f}, {hi:.2f}] (nu {nu}), rms diff "
              f"{np.sqrt(g['sq'].mean()):.3f}, rms claimed {np.sqrt(g['claimed'].mean()):.3f}, "
              f"df {dfs}")


def calib(spec: str, out: Path) -> None:
    rows = []
    if "=" in spec:
        name, paths = spec.split("=", 1)
        trials = pd.concat([read(p) for p in paths.split(",")], ignore_index=True)
        widths = np.sort(trials["width"].unique())
        grids = [(f"{lo}-{widths[-1]}", trials[trials["width"] >= lo]) for lo in widths[:2]]
    else:
        name, trials = Path(spec).name, every_seed(read(spec))
        grids = [(f"{sp} {off}", sub) for sp, off, sub in sub_grids(trials) if sp != "quarter"]
    n = trials["seed"].nunique()
    for label, sub in grids:
        for k in range(2, min(4, n // 2) + 1):
            rows += calib_pairs(sub, label, k)
    z = pd.DataFrame(rows)
    z.to_csv(out / f"calib_{name}.csv", index=False)
    print(f"{name}: disjoint seed sets, difference against the seed parts")
    z_grid = z.assign(spacing=z["grid"].str.split().str[0])
    calib_summary(z_grid, ["what", "k", "spacing"])
    calib_summary(z_grid, ["what", "k"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["dense", "checks", "calib"])
    p.add_argument("stores", nargs="+")
    p.add_argument("--out", type=Path, default=Path("."), help="folder for the per-row CSVs")
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    run = {"dense": dense, "checks": checks, "calib": calib}[a.what]
    for s in a.stores:
        run(s, a.out)


if __name__ == "__main__":
    main()
