"""What a subset of the grid can reproduce of the grid's lr*: the floor under any search.

A search runs part of the grid, and the analysis then reads lr* from those cells alone. How
close can that come to the grid's lr*, whatever the search? This script asks the analysis
itself, on subsets that no search can beat at their size: at every (family, width), every LR
within R octaves of the grid's *own* lr* (an oracle that knew the answer before running
anything), for several R. Each row: the gap of the subset's lr* to the grid's, the LRs it
kept, and its cost (trial-seconds priced at each width's median trial time, the smallest
width included, so a real search pays more: it must first find lr*). A first column says
how far lr* moves when only the LRs that the grid's own fit gives zero weight are left out
(those outside its window): an estimator that reads nothing outside its window moves 0.

    python benchmarks/search_floor.py STORE[:SWEEP.yaml][@SEEDS] ...

(the store specs of benchmarks/search_targets.py). If at the R where the cost reaches the
search's budget the gap already exceeds its target, no placement rule meets both.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))  # search_replay beside it

from search_replay import grid_tables, store_parser, store_spec, with_trials  # noqa: E402

from mutransfer.analysis import analyze  # noqa: E402
from mutransfer.results.store import Tables  # noqa: E402

RADII = (1.01, 1.26, 1.51, 2.01, 2.51)   # octaves from the grid's lr* (half-octave grids:
#                                          +-1, 1.25, 1.5, 2, 2.5 octaves, the ends included)


def load(spec: str) -> tuple[Path, Tables]:
    store, doc, seeds = store_spec(spec)
    return store, grid_tables(store, seeds, doc)


def group_key(row) -> tuple[str, int]:
    return str(row["parameterization"]), int(row["width"])


def lr_stars(store: Path, tables: Tables) -> dict[tuple[str, int], float]:
    a = analyze(store, tables=tables)
    return {(str(r.parameterization), int(r.width)): math.log2(r.lr_opt)
            for r in a.lr_opt.itertuples()}


def zero_weight_kept(store: Path, tables: Tables) -> pd.Series:
    """Per trial: does the grid's fit weigh its LR at its width (or did it diverge)?"""
    a = analyze(store, tables=tables)
    weighed = {}
    for g in a.optima:
        x, w = g.arrays.log2_lr, g.fit.weights[0]
        for lr, wt in zip(x, w):
            weighed[(str(g.key[0]), int(g.key[-1]), round(float(lr), 6))] = wt > 0
    t = tables.trials
    return t.apply(lambda r: weighed.get((*group_key(r), round(math.log2(r["lr"]), 6)), True)
                   or r["status"] == "diverged", axis=1)


def one_store(spec: str) -> pd.DataFrame:
    store, tables = load(spec)
    t = tables.trials
    grid = lr_stars(store, tables)
    median = pd.to_numeric(t["wall_time_s"]).groupby(t["width"]).median()
    full_cost = float(t["width"].map(median).sum())
    dist = t.apply(lambda r: abs(math.log2(r["lr"]) - grid.get(group_key(r), math.nan)), axis=1)
    weighed = with_trials(tables, zero_weight_kept(store, tables))
    cols = {"zero-weight out": lr_stars(store, weighed)}
    summary = []
    for radius in RADII:
        keep = (dist <= radius) | (t["status"] == "diverged") & (dist <= radius + 0.5)
        cols[f"R {radius:.2f}"] = lr_stars(store, with_trials(tables, keep))
        kept = t[keep]
        per_width = kept.groupby(["parameterization", "width"])["lr"].nunique().mean()
        summary.append({"R (octaves)": f"{radius:.2f}", "LRs a width": f"{per_width:.1f}",
                        "trial-s med": f"{100 * kept['width'].map(median).sum() / full_cost:.1f}%"})
    gaps = pd.DataFrame({k: {g: v.get(g, math.nan) - x for g, x in grid.items()}
                         for k, v in cols.items()})
    gaps.insert(0, "grid lr*", pd.Series(grid))
    print(f"\n=== {spec}: log2 lr* of the grid, and each subset's gap to it ===")
    print(gaps.round(2).to_string())
    out = pd.DataFrame(summary)
    out["max |gap|"] = [f"{np.nanmax(np.abs(gaps[f'R {r:.2f}'])):.2f}" for r in RADII]
    print(f"zero-weight LRs left out: max |gap| {np.nanmax(np.abs(gaps['zero-weight out'])):.2f}")
    print(out.to_string(index=False))
    sys.stdout.flush()
    return out


def main(argv: list[str] | None = None) -> int:
    for spec in store_parser(__doc__.split("\n\n")[0]).parse_args(argv).stores:
        one_store(spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
