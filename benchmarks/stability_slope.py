"""Coverage of the stability slope's 95% interval (analysis/brackets.py) on planted boundaries.

Boundaries on a line log2 boundary = a + b log2 width (b uniform in [-1.5, 0.5]) plus normal
scatter of sd s octaves, read through an LR grid of step 1 or 1/2 octave at a random offset
(the same grid at every width, as a sweep runs it): each width sees the bracket [largest grid
LR below the boundary, the next one]. Prints, per number of widths (consecutive doublings from
64), scatter and grid step: how often the interval holds the true slope and its mean width,
beside the OLS t interval through the bracket midpoints (what the stability_slope table gave
before issue 19: zero width whenever the midpoints fall on a line).

    python benchmarks/stability_slope.py [--draws 2000]
"""

from __future__ import annotations

import argparse

import numpy as np

from mutransfer.analysis.brackets import bracket_slope
from mutransfer.analysis.slopes import ols, t_interval


def cell(n_widths: int, scatter: float, step: float, draws: int, rng) -> tuple:
    x = np.arange(6, 6 + n_widths, dtype=float)
    hit, width, ols_hit, ols_width = [], [], [], []
    for _ in range(draws):
        b, a, offset = rng.uniform(-1.5, 0.5), rng.uniform(-10, -2), rng.uniform(0, 1)
        y = a + b * x + rng.normal(0, scatter, n_widths)
        lo = np.floor((y - offset) / step) * step + offset
        r = bracket_slope(x, lo, lo + step)
        hit.append(r.ci_low <= b <= r.ci_high)
        width.append(r.ci_high - r.ci_low)
        lo_o, hi_o, _ = t_interval(ols(x, lo + step / 2), n_widths)
        if np.isfinite(lo_o):
            ols_hit.append(lo_o - 1e-12 <= b <= hi_o + 1e-12)
            ols_width.append(hi_o - lo_o)
    return _mean(hit), _mean(width), _mean(ols_hit), _mean(ols_width)


def _mean(values: list) -> float:
    return float(np.mean(values)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| widths | scatter (oct) | grid step | coverage | mean width | OLS coverage | "
          "OLS mean width |")
    print("|---|---|---|---|---|---|---|")
    for n in (2, 3, 4, 5):
        for s in (0.0, 0.15, 0.3, 0.5):
            for step in (1.0, 0.5):
                cov, wid, ocov, owid = cell(n, s, step, args.draws, rng)
                print(f"| {n} | {s:.2f} | {step:g} | {cov:.3f} | {wid:.2f} | "
                      f"{'-' if np.isnan(ocov) else f'{ocov:.3f}'} | "
                      f"{'-' if np.isnan(owid) else f'{owid:.2f}'} |", flush=True)


if __name__ == "__main__":
    main()
