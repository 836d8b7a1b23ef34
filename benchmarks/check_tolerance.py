"""What drift tolerance does a regret of at most 0.01 nats at 8x width allow? (`check.tolerance`)

An lr* drift of d octaves per doubling of width, ignored, puts the LR 3·d octaves off the
optimum at 8x the tuned width. The regret is how much higher the loss is there: for each
(parameterization, width) of a stored sweep, the seed-mean final eval loss against log2 LR is
fitted by the analysis's own curve (mutransfer.analysis.fit.fit_optimum: asymmetric, fitted
in a window around the optimum), and the misplacement Δ at which the fitted curve rises by
REGRET nats is solved on each side (the steeper side counts). The tolerance that keeps the
regret at 8x width below REGRET is Δ/3; the check's default takes the smallest over the
widths and parameterizations measured.

    python benchmarks/check_tolerance.py STORE [STORE ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutransfer.analysis.fit import fit_optimum, model  # noqa: E402

REGRET = 0.01  # nats
DOUBLINGS = 3  # 8x width


def misplacement(params: np.ndarray, regret: float, side: float) -> float:
    """Octaves from the fitted optimum (towards `side`, ±1) at which the curve has risen by
    `regret`; NaN when it never does within 4 octaves."""
    v = params[-1]
    xs = v + side * np.linspace(0.0, 4.0, 4001)
    rise = model(xs, params[None, :])[0] - model(np.array([v]), params[None, :])[0, 0]
    above = np.flatnonzero(rise >= regret)
    return float(abs(xs[above[0]] - v)) if len(above) else float("nan")


def curves(store: str) -> pd.DataFrame:
    t = pd.read_parquet(Path(store) / "trials")
    t = t[t["status"] == "complete"]
    loss = t["final_eval_loss"].where(~t["diverged"].astype(bool))
    t = t.assign(loss=loss, x=np.log2(t["lr"]))
    return t.groupby(["parameterization", "width", "x"])["loss"].agg(["mean", "count"]
                                                                       ).reset_index()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stores", nargs="+")
    args = p.parse_args()
    print("| store | param | width | LRs | lr* (log2) | Δ low / high for 0.01 nats | "
          "tolerance Δ/3 |")
    print("|---|---|---|---|---|---|---|")
    out = []
    for store in args.stores:
        c = curves(store)
        for (param, width), g in c.groupby(["parameterization", "width"]):
            g = g.sort_values("x")
            fit = fit_optimum(g["x"].to_numpy(), g["mean"].to_numpy()[None, :])
            if not fit.fitted[0]:
                continue
            lo = misplacement(fit.params[0], REGRET, -1.0)
            hi = misplacement(fit.params[0], REGRET, +1.0)
            tol = np.nanmin([lo, hi]) / DOUBLINGS
            out.append(tol)
            print(f"| {Path(store).name} | {param} | {width} | {len(g)} | "
                  f"{fit.log2_lr[0]:+.2f} | {lo:.2f} / {hi:.2f} | {tol:.3f} |")
    if out:
        print(f"\nsmallest tolerance: {min(out):.3f}; median {np.median(out):.3f} "
              f"({len(out)} curves)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
