"""Calibration of the analysis's 95% intervals on planted results: how often they cover the truth.

Each repetition is one family (named rep0, rep1, ...) at widths 64, 128, 256 with a planted
optimum log2 lr*(w) = c + EXPONENT x log2(w / 64), c drawn uniformly, so the optimum falls
anywhere between grid points (every grid offset). A trial's loss is

    3 - 0.05 log2(w / 64) + curve(log2 lr - log2 lr* - shift_seed) + offset_seed + noise

with, per table row,
  curve      sym     a parabola, CURVATURE x t^2
             rise2   an asymmetric bowl rising 2x faster one octave above the optimum than one
                     octave below: CURVATURE x 2 (e^{kt} - 1 - kt) / k^2, k = 1.0 (1.95x)
             rise5   the same with k = 2.4 (5.1x faster above)
  noise      iid     sd NOISE per trial
             growing sd NOISE x (1 + 1.5 |log2 lr - log2 lr*|): 2.5x one octave away, 4x at two
             seedopt each seed's whole curve shifted by shift_seed ~ N(0, 0.25^2) octaves
                     (independently per width), iid noise on top; the truth is then the optimum
                     of the expected curve over seeds (for the bowl: -k 0.25^2 / 2 from c)
             kink3   (stress case, not in the default table) a parabola 3x steeper above
                     the optimum than below: the curvature jumps at lr*, a kink the smooth
                     bowl cannot follow
  position   inside  every width's optimum at least 1.5 octaves inside the grid
             edge    width 64's optimum 0-1 octave below the grid's largest LR (128's 0.5-1.5,
                     256's 1-2): some optima are on the edge, where the analysis declines
and per table column the seeds (2, 3, 5) and the LRs: 6, 11 or 21 over the same 5 octaves
(one-, half- and quarter-octave steps). Every seed also runs high or low everywhere
(offset_seed ~ N(0, 0.02^2)), which must not count as noise.

All repetitions of a cell go through one public `analyze(..., tables=...)` call. A cell shows
lr* coverage / drift coverage (intervals that hold the truth, of those reported), and the
shares the method declined (no interval: an optimum on the edge, or too few degrees of
freedom). Target: 0.93-0.97 in every cell.

    python benchmarks/interval_coverage.py                 # the full table (~30 min, 2 cores)
    python benchmarks/interval_coverage.py --reps 200 --curves rise5 --noise growing
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd

from mutransfer.analysis import analyze
from mutransfer.results.store import Tables

WIDTHS = [64, 128, 256]
EXPONENT = -0.5
CURVATURE = 0.04        # nats per octave^2 near the optimum
NOISE = 0.01            # sd of one trial's loss near the optimum
SEED_OFFSET_SD = 0.02   # a seed running high or low everywhere
SEED_SHIFT_SD = 0.25    # octaves: a seed-specific optimum (noise model seedopt)
LOW, SPAN = -12.0, 5.0  # the grid: 2^-12 .. 2^-7
CURVES = {"sym": 0.0, "rise2": 1.0, "rise5": 2.4}
KINKED = {"kink3": 3.0}   # stress case outside the model: curvature 3x above, a kink at lr*
NOISES = ("iid", "growing", "seedopt")
POSITIONS = ("inside", "edge")
TARGET = (0.93, 0.97)
MIN_JUDGED = 475  # intervals: binomial s.e. of a 0.95 coverage <= 0.01, half the target band


def curve(t: np.ndarray, name: str) -> np.ndarray:
    if name in KINKED:
        return CURVATURE * t**2 * np.where(t > 0, KINKED[name], 1.0)
    k = CURVES[name]
    if k == 0:
        return CURVATURE * t**2
    return CURVATURE * 2.0 * (np.expm1(k * t) - k * t) / k**2


def planted_optima(reps: int, position: str, rng: np.random.Generator) -> np.ndarray:
    """(reps, widths) planted log2 lr* of the seeds' centre."""
    top = LOW + SPAN
    down = EXPONENT * np.log2(np.array(WIDTHS) / WIDTHS[0])
    if position == "edge":
        c = rng.uniform(top - 1.0, top, reps)
    else:
        c = rng.uniform(LOW + 1.5 - down[-1], top - 1.5, reps)
    return c[:, None] + down[None, :]


def planted_trials(reps: int, seeds: int, n_lrs: int, curve_name: str, noise: str,
                   position: str, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    """Trials of `reps` families and their true log2 lr* (reps, widths)."""
    k = CURVES.get(curve_name, 0.0)   # the bowl's shift of the expected curve (seedopt)
    log2_lr = LOW + np.linspace(0.0, SPAN, n_lrs)
    centre = planted_optima(reps, position, rng)
    w = len(WIDTHS)
    shift = (SEED_SHIFT_SD * rng.standard_normal((reps, w, seeds)) if noise == "seedopt"
             else np.zeros((reps, w, seeds)))
    t = log2_lr[None, None, None, :] - centre[..., None, None] - shift[..., None]
    sd = NOISE * (1.0 + 1.5 * np.abs(log2_lr[None, None, None, :] - centre[..., None, None])
                  if noise == "growing" else 1.0)
    level = 3.0 - 0.05 * np.log2(np.array(WIDTHS) / WIDTHS[0])
    offset = SEED_OFFSET_SD * rng.standard_normal((reps, 1, seeds, 1))
    loss = (level[None, :, None, None] + curve(t, curve_name) + offset
            + sd * rng.standard_normal(t.shape))
    truth = centre - (k * SEED_SHIFT_SD**2 / 2 if noise == "seedopt" else 0.0)
    r, wi, s, li = np.meshgrid(np.arange(reps), np.arange(w), np.arange(seeds),
                               np.arange(n_lrs), indexing="ij")
    trials = pd.DataFrame({
        "trial_id": [f"{a}-{b}-{c}-{d}" for a, b, c, d in zip(r.ravel(), wi.ravel(), s.ravel(),
                                                             li.ravel())],
        "sweep": "coverage", "width": np.array(WIDTHS)[wi.ravel()],
        "parameterization": [f"rep{a}" for a in r.ravel()], "lr": 2.0 ** log2_lr[li.ravel()],
        "seed": s.ravel(), "optimizer": "adam", "status": "complete", "diverged": False,
        "final_eval_loss": loss.ravel(), "best_eval_loss": loss.ravel(), "search": "grid"})
    trials["diverge_step"] = pd.array([None] * len(trials), dtype="Int64")
    return trials, truth


def covers(lo: pd.Series, hi: pd.Series, truth: np.ndarray) -> tuple[int, int]:
    """(intervals reported, intervals that hold the truth)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    has = np.isfinite(lo) & np.isfinite(hi)
    held = has & (lo <= truth) & (truth <= hi)
    return int(has.sum()), int(held.sum())


def measure(reps: int, seeds: int, n_lrs: int, curve_name: str, noise: str, position: str,
            rng_seed: int = 0) -> dict:
    rng = np.random.default_rng([rng_seed, seeds, n_lrs, list(CURVES | KINKED).index(curve_name),
                                 NOISES.index(noise), POSITIONS.index(position)])
    trials, truth = planted_trials(reps, seeds, n_lrs, curve_name, noise, position, rng)
    t0 = time.perf_counter()
    a = analyze("coverage", tables=Tables(trials, pd.DataFrame()))
    secs = time.perf_counter() - t0
    opt = a.lr_opt
    rep = opt["parameterization"].str[3:].astype(int).to_numpy()
    wcol = np.searchsorted(WIDTHS, opt["width"].to_numpy())
    true_opt = truth[rep, wcol]
    n_opt, held_opt = covers(np.log2(opt["ci_low"]), np.log2(opt["ci_high"]), true_opt)
    fitted = opt["method"].isin(["linex", "parabola"]).to_numpy()
    bias = float(np.mean(np.log2(opt["lr_opt"].to_numpy()[fitted]) - true_opt[fitted]))
    d = a.drift
    n_d, held_d = covers(d["ci_low"], d["ci_high"], np.full(len(d), EXPONENT))
    return {"curve": curve_name, "noise": noise, "position": position, "seeds": seeds,
            "lrs": n_lrs, "lr_cov": held_opt / n_opt if n_opt else np.nan,
            "lr_declined": 1 - n_opt / len(opt), "drift_cov": held_d / n_d if n_d else np.nan,
            "lr_n": n_opt, "drift_n": n_d,
            "drift_declined": 1 - n_d / len(d),
            "lr_width": float(np.nanmedian(np.log2(opt["ci_high"] / opt["ci_low"]))),
            "bias": bias,
            "secs": secs}


def cell_text(row: pd.Series) -> str:
    def cov(v: float, n: int) -> str:
        if np.isnan(v):
            return "-"
        return f"{v:.3f}" if n >= MIN_JUDGED else f"({v:.2f}, n={n})"
    text = f"{cov(row.lr_cov, row.lr_n)}/{cov(row.drift_cov, row.drift_n)}"
    if row.lr_declined > 0.0005 or row.drift_declined > 0.0005:
        text += f" ({row.lr_declined:.0%}/{row.drift_declined:.0%} declined)"
    return text


def table(df: pd.DataFrame) -> str:
    """Markdown: rows curve x noise x position, columns seeds x LRs."""
    cols = sorted({(s, n) for s, n in zip(df.seeds, df.lrs)})
    head = "| curve | noise | position | " + " | ".join(f"{s} seeds, {n} LRs" for s, n in cols)
    lines = [head + " |", "|" + "---|" * (3 + len(cols))]
    for (c, n, p), g in df.groupby(["curve", "noise", "position"], sort=False):
        by = {(r.seeds, r.lrs): cell_text(r) for r in g.itertuples()}
        lines.append(f"| {c} | {n} | {p} | " + " | ".join(by.get(k, "") for k in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=1000, help="families per cell")
    p.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 5])
    p.add_argument("--lrs", type=int, nargs="+", default=[6, 11, 21])
    p.add_argument("--curves", nargs="+", default=list(CURVES), choices=list(CURVES | KINKED),
                   help="kink3: a stress case outside the fitted model (not in the default "
                        "table)")
    p.add_argument("--noise", nargs="+", default=list(NOISES), choices=NOISES)
    p.add_argument("--position", nargs="+", default=list(POSITIONS), choices=POSITIONS)
    p.add_argument("--rng", type=int, default=0)
    args = p.parse_args()
    print(f"planted: widths {WIDTHS}, exponent {EXPONENT}, curvature {CURVATURE}/octave^2, "
          f"noise sd {NOISE}, seed offset sd {SEED_OFFSET_SD}, seed shift sd {SEED_SHIFT_SD} "
          f"(seedopt), LRs over 2^{LOW:g}..2^{LOW + SPAN:g}; {args.reps} families per cell; "
          f"cells: lr* / drift coverage (target {TARGET[0]}-{TARGET[1]})", flush=True)
    rows = []
    t0 = time.perf_counter()
    for c, n, pos in itertools.product(args.curves, args.noise, args.position):
        for s, nl in itertools.product(args.seeds, args.lrs):
            rows.append(measure(args.reps, s, nl, c, n, pos, args.rng))
            r = rows[-1]
            print(f"  {c:5s} {n:7s} {pos:6s} seeds {s} LRs {nl:2d}: {cell_text(pd.Series(r))}"
                  f"  median width {r['lr_width']:.3f} oct, bias {r['bias']:+.3f} oct "
                  f"({r['secs']:.1f}s)", flush=True)
    df = pd.DataFrame(rows)
    print()
    print(table(df))
    lr_j = df.lr_n >= MIN_JUDGED
    d_j = df.drift_n >= MIN_JUDGED
    lr_ok = df.lr_cov.between(*TARGET) & lr_j
    d_ok = df.drift_cov.between(*TARGET) & d_j
    print(f"\ncells in {TARGET[0]}-{TARGET[1]}: lr* {int(lr_ok.sum())}/{int(lr_j.sum())}, drift "
          f"{int(d_ok.sum())}/{int(d_j.sum())} of the cells with >= {MIN_JUDGED} intervals "
          f"(lr* {len(df) - int(lr_j.sum())}, drift {len(df) - int(d_j.sum())} cells with "
          f"fewer: shown in parentheses with their n); lr* coverage "
          f"{df.lr_cov[lr_j].min():.3f}-{df.lr_cov[lr_j].max():.3f}, drift "
          f"{df.drift_cov[d_j].min():.3f}-{df.drift_cov[d_j].max():.3f}; "
          f"declined lr* {df.lr_declined.mean():.1%} (max {df.lr_declined.max():.1%}), drift "
          f"{df.drift_declined.mean():.1%} (max {df.drift_declined.max():.1%}); "
          f"{time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
