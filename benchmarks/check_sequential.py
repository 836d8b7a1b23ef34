"""How often the sequential `check` says PASS when the true drift sits exactly on the bound.

    python benchmarks/check_sequential.py [--drift 0.12] [--tolerance 0.12] [--reps 200000]

The transfer stage's interval model (docs/models.md, "the equivalence test"): the drift's
standard error is sqrt(Σc_w² · (σ²/k + p²)) with k seeds, σ one seed's sd of log2 lr*
(0.15 octave, the stored mup_ssm Mamba run), p the placement term per width (0.063,
drift.PLACEMENT_SD) and Σc_w² the lever arm (0.1 for widths 32-512); t quantile at
widths · (k - 1) degrees of freedom. Simulated here: the placement error is drawn once per
check (the grid does not move between rounds), the seeds' slopes are added two at a time
(rounds of 2, 4, 6, 8 seeds, `budget.seeds: 8`), and the seed variance each round is the one
its seeds show (scaled chi-square). Each round decides as checkverdict.equivalence does: PASS
inside ±tolerance, FAIL outside, else the next round. Prints the share of PASS after the
first round and after each later one; one look at a 95% interval allows 2.5% at the bound.
`--redraw-placement` draws the placement error anew each round (as if the grid moved).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer.analysis.tdist import t_quantile  # noqa: E402

SEED_SD, PLACEMENT_SD, LEVER, WIDTHS = 0.15, 0.063, 0.1, 5


def simulate(drift: float, tolerance: float, reps: int, rounds: list[int],
             rng: np.random.Generator, redraw: bool = False) -> list[float]:
    """Share of checks that have said PASS by the end of each round; `redraw`: a new
    placement error each round (independent rounds: the least favourable case)."""
    placement = rng.normal(0, np.sqrt(LEVER) * PLACEMENT_SD, reps)
    seeds = rng.normal(0, np.sqrt(LEVER) * SEED_SD, (reps, max(rounds)))
    open_ = np.ones(reps, bool)
    passed = np.zeros(reps, bool)
    shares = []
    for k in rounds:
        df = WIDTHS * (k - 1)
        if redraw:
            placement = rng.normal(0, np.sqrt(LEVER) * PLACEMENT_SD, reps)
        estimate = drift + placement + seeds[:, :k].mean(axis=1)
        seed_var = SEED_SD**2 * rng.chisquare(df, reps) / df
        half = t_quantile(0.975, df) * np.sqrt(LEVER * (seed_var / k + PLACEMENT_SD**2))
        lo, hi = estimate - half, estimate + half
        inside = (lo >= -tolerance) & (hi <= tolerance)
        outside = (lo > tolerance) | (hi < -tolerance)
        passed |= open_ & inside
        open_ &= ~(inside | outside)
        shares.append(float(passed.mean()))
    return shares


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drift", type=float, default=0.12)
    ap.add_argument("--tolerance", type=float, default=0.12)
    ap.add_argument("--reps", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--redraw-placement", action="store_true",
                    help="a new placement error each round (the least favourable case)")
    args = ap.parse_args()
    rounds = [2, 4, 6, 8]
    shares = simulate(args.drift, args.tolerance, args.reps, rounds,
                      np.random.default_rng(args.seed), args.redraw_placement)
    print(f"true drift {args.drift:+.3f}, tolerance ±{args.tolerance}, {args.reps} checks, "
          f"widths 32-512 (Σc² {LEVER}), seed sd {SEED_SD}, placement {PLACEMENT_SD}"
          f"{' redrawn each round' if args.redraw_placement else ' drawn once'}")
    for k, share in zip(rounds, shares, strict=True):
        print(f"PASS by the round of {k} seeds: {100 * share:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
