"""Calibration of the analysis's 95% intervals on planted results: how often they cover the truth.

Each repetition is one family with a planted optimum lr*(w) = 2^(c + exponent x log2(w / 64)),
c drawn uniformly over an octave (so lr* falls anywhere between grid points), and a loss bowl
curvature x (log2 lr - log2 lr*)^2 plus a per-seed offset (constant across LRs, as a seed's data
order and init shift a whole curve) plus independent noise per trial. All repetitions go
through one `analyze` call (a family per repetition, named rep0, rep1, ...), and the script
counts how often lr_opt's interval covers the planted lr* and the drift's interval covers the
planted exponent.

It uses only the public `analyze(..., tables=...)` and the table columns that every version
has, so the same script measures an older checkout (run it with PYTHONPATH at that tree).

    python benchmarks/interval_coverage.py --reps 400 --seeds 2 3 5 --noise 0.01 0.03
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from mutransfer.analysis import analyze
from mutransfer.results.store import Tables

GRID = [2.0**e for e in range(-12, -3)]   # 2^-12 .. 2^-4, one LR per octave
WIDTHS = [64, 128, 256]
EXPONENT = -0.5
CURVATURE = 0.04


def planted_trials(reps: int, seeds: int, noise: float, seed_sd: float,
                   rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """Trials of `reps` families and their planted log2 lr* at the base width."""
    centre = -8.0 + rng.uniform(0.0, 1.0, reps)
    rows = []
    for r in range(reps):
        offsets = seed_sd * rng.standard_normal(seeds)
        for w in WIDTHS:
            opt = centre[r] + EXPONENT * np.log2(w / WIDTHS[0])
            for lr in GRID:
                mean = 3.0 - 0.05 * np.log2(w / WIDTHS[0]) + CURVATURE * (np.log2(lr) - opt) ** 2
                for s in range(seeds):
                    loss = mean + offsets[s] + noise * rng.standard_normal()
                    rows.append({"trial_id": f"{r}-{w}-{lr}-{s}", "sweep": "coverage",
                                 "width": w, "parameterization": f"rep{r}", "lr": lr, "seed": s,
                                 "optimizer": "adam", "status": "complete", "diverged": False,
                                 "diverge_step": None, "final_eval_loss": loss,
                                 "best_eval_loss": loss, "search": "grid"})
    trials = pd.DataFrame(rows)
    trials["diverge_step"] = trials["diverge_step"].astype("Int64")
    return trials, centre


def covers(lo: pd.Series, hi: pd.Series, truth: np.ndarray) -> tuple[int, int]:
    """(intervals reported, intervals that hold the truth)."""
    has = np.isfinite(lo.to_numpy()) & np.isfinite(hi.to_numpy())
    held = has & (lo.to_numpy() <= truth) & (truth <= hi.to_numpy())
    return int(has.sum()), int(held.sum())


def measure(reps: int, seeds: int, noise: float, seed_sd: float, n_boot: int,
            rng_seed: int) -> list[dict]:
    rng = np.random.default_rng([rng_seed, seeds, int(noise * 1e6)])
    trials, centre = planted_trials(reps, seeds, noise, seed_sd, rng)
    t0 = time.perf_counter()
    a = analyze("coverage", n_boot=n_boot, tables=Tables(trials, pd.DataFrame()))
    secs = time.perf_counter() - t0
    rep = a.lr_opt["parameterization"].str[3:].astype(int).to_numpy()
    truth = 2.0 ** (centre[rep] + EXPONENT * np.log2(a.lr_opt["width"].to_numpy() / WIDTHS[0]))
    octaves = np.log2(a.lr_opt["ci_high"] / a.lr_opt["ci_low"])
    base = {"seeds": seeds, "noise": noise, "groups": len(a.lr_opt), "secs": round(secs, 1)}
    out = []

    def add(what: str, lo, hi, t, width=np.nan, n_all=None):
        n, held = covers(lo, hi, t)
        out.append({**base, "interval": what, "reported": f"{n}/{n_all or len(t)}",
                    "coverage": held / n if n else np.nan, "median_width": width})

    add("lr* (ci)", a.lr_opt["ci_low"], a.lr_opt["ci_high"], truth,
        float(np.nanmedian(octaves)) if octaves.notna().any() else np.nan)
    if "boot_low" in a.lr_opt:
        boot = np.log2(a.lr_opt["boot_high"] / a.lr_opt["boot_low"])
        add("lr* (seed bootstrap)", a.lr_opt["boot_low"], a.lr_opt["boot_high"], truth,
            float(np.nanmedian(boot)) if boot.notna().any() else np.nan)
    d = a.drift
    exp = np.full(len(d), EXPONENT)
    add("drift (ci)", d["ci_low"], d["ci_high"], exp,
        float(np.nanmedian(d["ci_high"] - d["ci_low"])))
    if "boot_low" in d:
        add("drift (seed bootstrap)", d["boot_low"], d["boot_high"], exp,
            float(np.nanmedian(d["boot_high"] - d["boot_low"])) if d["boot_low"].notna().any()
            else np.nan)
    if "ols_low" in d:
        add("drift (OLS t, df 1)", d["ols_low"], d["ols_high"], exp,
            float(np.nanmedian(d["ols_high"] - d["ols_low"])))
    else:
        lo, hi = d["slope"] - 1.96 * d["stderr"], d["slope"] + 1.96 * d["stderr"]
        add("drift (slope +- 1.96 OLS s.e.)", lo, hi, exp, float(np.nanmedian(hi - lo)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=400, help="families (repetitions) per setting")
    p.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 5])
    p.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.03],
                   help="sd of a trial's loss about its seed's curve")
    p.add_argument("--seed-sd", type=float, default=0.02, help="sd of a seed's offset")
    p.add_argument("--bootstrap", type=int, default=1000, help="draws / resamples per interval")
    p.add_argument("--rng", type=int, default=0)
    args = p.parse_args()
    print(f"planted: grid 2^-12..2^-4 (1 octave steps), widths {WIDTHS}, exponent {EXPONENT}, "
          f"curvature {CURVATURE}/octave^2, seed offset sd {args.seed_sd}, "
          f"{args.reps} repetitions per row, {args.bootstrap} draws")
    rows = []
    for seeds in args.seeds:
        for noise in args.noise:
            rows += measure(args.reps, seeds, noise, args.seed_sd, args.bootstrap, args.rng)
    df = pd.DataFrame(rows)
    df["coverage"] = df["coverage"].map(lambda v: "-" if np.isnan(v) else f"{v:.3f}")
    df["median_width"] = df["median_width"].map(lambda v: "-" if np.isnan(v) else f"{v:.3f}")
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
