"""The transfer search against issue 29's target, replayed on full-grid stores.

Target: the search costs <= 35% of the grid's trial-seconds, and at every (parameterization,
width) its lr* is within 0.10 octave of the grid's and inside the grid's 95% interval. Each
variant is replayed on a finished grid store (benchmarks/search_replay.py: the strategy's own
decisions, two trials at a time, each trial's stored row), then analysed by
`mutransfer.analysis.analyze` on the trials it ran; the grid's answer is the same analysis on
every trial of the store (on the sweep's axes and seeds). Cost: trial-seconds (the stored
trials' wall times), the same at each width's median trial time (`trial-s med`: every trial of
a width does the same work, so this leaves out the machine's load changing while the grid
ran, or between a search run and the grid completed after it in the same store), trial-tokens
and FLOPs (6 x parameters x tokens per trial, the dense estimate: the widest widths dominate
it as they dominate GPU-hours).

    python benchmarks/search_targets.py STORE[:SWEEP.yaml][@SEEDS] ...
    python benchmarks/search_targets.py /tmp/grid_search_cpu /tmp/real_B:real_B.yaml@0,1

SWEEP.yaml is needed where the store holds none (a store written by a script): its cells are
then matched to the stored trials by parameterization, width, LR and seed. @SEEDS replays a
sweep of those seeds only (e.g. @0,1), so one dense store gives several disjoint seed sets.
`--stop P` also replays the default search with early stopping (search.stop, protect_octaves
P; a stopped trial is priced at the share of its tokens it ran). `--real RUN_STORE` compares a
real run of the default search (`mutransfer sweep` of the same sweep file, on Ray) with its
replay on the first STORE: the trial ids each ran, the largest difference of their losses,
and the real run's own figures against the grid (its stored wall times, raw).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).parent))  # search_replay beside it

from search_replay import Replayed, analysed, replay, store_parser, store_spec  # noqa: E402

from mutransfer.results.store import read_tables  # noqa: E402
from mutransfer.sweep.search.stopping import StopOptions  # noqa: E402

SECONDS_TARGET = 0.35   # share of the grid's trial-seconds
GAP_TARGET = 0.10       # octaves between the search's lr* and the grid's

# (name, the search: mapping); the default first, then every seed at every LR it runs (the
# default before seed_tolerance), then the rule issue 29 replaced (issue 19: the whole grid at
# the smallest width, every LR within 2.5 octaves of the optimum elsewhere, every seed)
VARIANTS: list[tuple[str, dict[str, Any], StopOptions | None]] = [
    ("transfer (default)", {"kind": "transfer"}, None),
    ("every seed", {"kind": "transfer", "seed_tolerance": None}, None),
    ("before (issue 19)", {"kind": "transfer", "full_widths": 1, "settle_octaves": 2.5,
                           "seed_tolerance": None}, None),
]


def flops(rows: pd.DataFrame) -> float:
    return float((6.0 * pd.to_numeric(rows["params"]) * pd.to_numeric(rows["tokens"])).sum())


def shares(g: pd.DataFrame, df: pd.DataFrame) -> dict[str, float]:
    """What the trials `df` cost as shares of the grid's `g`: trial-seconds as stored, the same
    at each width's median grid trial (a stopped trial priced at the share of its tokens it
    ran), trial-tokens and FLOPs."""
    median = pd.to_numeric(g["wall_time_s"]).groupby(g["width"]).median()
    g_tokens = dict(zip(g["trial_id"].astype(str), pd.to_numeric(g["tokens"])))
    ran_share = pd.to_numeric(df["tokens"]) / df["trial_id"].astype(str).map(g_tokens)
    return {"trial-s": float(pd.to_numeric(df["wall_time_s"]).sum()
                             / pd.to_numeric(g["wall_time_s"]).sum()),
            "trial-s med": float((df["width"].map(median) * ran_share).sum()
                                 / g["width"].map(median).sum()),
            "trial-tokens": float(pd.to_numeric(df["tokens"]).sum()
                                  / pd.to_numeric(g["tokens"]).sum()),
            "FLOPs": flops(df) / flops(g)}


def gaps(grid: Replayed, run: Replayed) -> pd.DataFrame:
    """Per (family, width): the grid's log2 lr* [interval], the variant's, the gap, inside?"""
    ga = grid.analysis
    cols = ga.group_cols
    ref = ga.lr_opt.set_index(cols)
    mine = run.analysis.lr_opt.set_index(cols).reindex(ref.index) if run.analysis else None
    ran = pd.DataFrame(run.rows)
    n_lrs = ran.groupby(cols)["lr"].nunique() if set(cols) <= set(ran.columns) else None
    out = []
    for key, g in ref.iterrows():
        x = math.log2(g["lr_opt"])
        lo, hi = (math.log2(g[c]) if np.isfinite(g[c]) and g[c] > 0 else math.nan
                  for c in ("ci_low", "ci_high"))
        y = math.log2(mine.loc[key, "lr_opt"]) if mine is not None and \
            np.isfinite(mine.loc[key, "lr_opt"]) else math.nan
        gap = y - x
        # no interval at the grid (an edge optimum, a bound): inside means the same value
        inside = (lo - 1e-9 <= y <= hi + 1e-9) if np.isfinite(lo) and np.isfinite(hi) \
            else abs(gap) <= 1e-9
        out.append({"group": "/".join(map(str, key if isinstance(key, tuple) else (key,))),
                    "grid": f"{x:+.2f} [{lo:+.2f},{hi:+.2f}]" if np.isfinite(lo) else
                    f"{x:+.2f} (no interval)", "search": f"{y:+.2f}", "gap": gap,
                    "LRs run": int(n_lrs.get(key, 0)) if n_lrs is not None else -1,
                    "inside": bool(inside)})
    return pd.DataFrame(out)


def one_store(spec: str) -> pd.DataFrame:
    store, doc, seeds = store_spec(spec)
    grid = replay(store, "grid", {"kind": "grid"}, seeds=seeds, doc=doc)
    if grid.analysis is None:
        sys.exit(f"{spec}: the grid's analysis failed: {grid.note}")
    g = pd.DataFrame(grid.rows)
    print(f"\n=== {spec}: grid {len(g)} trials, "
          f"{float(pd.to_numeric(g['wall_time_s']).sum()):,.0f} trial-s, "
          f"{float(pd.to_numeric(g['tokens']).sum()):,.0f} trial-tokens, {flops(g):.3g} FLOPs ===")
    rows = []
    for name, search, stop in VARIANTS:
        r = replay(store, name, search, stop=stop, seeds=seeds, doc=doc)
        df = pd.DataFrame(r.rows)
        cost = shares(g, df)
        sec = cost["trial-s"]
        tab = gaps(grid, r)
        worst = float(np.nanmax(np.abs(tab["gap"]))) if tab["gap"].notna().any() else math.inf
        if tab["gap"].isna().any():
            worst = math.inf
        met = sec <= SECONDS_TARGET and worst <= GAP_TARGET and bool(tab["inside"].all())
        rows.append({"variant": name, "trials": len(df),
                     **{k: f"{100 * v:.1f}%" for k, v in cost.items()},
                     "max |gap|": f"{worst:.2f}",
                     "inside": f"{int(tab['inside'].sum())}/{len(tab)}",
                     "target": "met" if met else "MISSED"})
        print(f"-- {name}: per (family, width), log2 lr*")
        print(tab.assign(gap=tab["gap"].map(lambda v: f"{v:+.2f}")).to_string(index=False))
    out = pd.DataFrame(rows)
    print(out.to_string(index=False))
    sys.stdout.flush()
    return out


def real_run(spec: str, real_store: Path) -> None:
    """A real run of the default search against its replay on the grid store `spec`."""
    store, doc, seeds = store_spec(spec)
    grid = replay(store, "grid", {"kind": "grid"}, seeds=seeds, doc=doc)
    rep = replay(store, "replay", {"kind": "transfer"}, seeds=seeds, doc=doc, analysis=False)
    real = read_tables(real_store)
    ran = real.trials[real.trials["status"].isin(("complete", "diverged"))]
    run = Replayed("real", ran.to_dict("records"))
    run.trials, run.analysis, run.note = analysed(run.rows, real, real_store)
    mine = {str(r["trial_id"]): r for r in rep.rows}
    theirs = {str(r["trial_id"]): r for r in run.rows}
    both = set(mine) & set(theirs)
    diff = max((abs(float(mine[t]["final_eval_loss"]) - float(theirs[t]["final_eval_loss"]))
                for t in both if not mine[t].get("diverged") and not theirs[t].get("diverged")),
               default=math.nan)
    g = pd.DataFrame(grid.rows)
    df = pd.DataFrame(run.rows)
    cost = shares(g, df)
    tab = gaps(grid, run)
    print(f"\n=== real run {real_store} against {spec} ===")
    print(f"trials: real {len(theirs)}, replayed {len(mine)}; only real {len(set(theirs) - both)}, "
          f"only replayed {len(set(mine) - both)}; max |loss difference| {diff:.3g}")
    print(tab.assign(gap=tab["gap"].map(lambda v: f"{v:+.2f}")).to_string(index=False))
    print(f"real: {len(df)} trials, {float(pd.to_numeric(df['wall_time_s']).sum()):,.0f} "
          f"trial-s ({100 * cost['trial-s']:.1f}% of the grid's, measured at another load), "
          f"trial-s med {100 * cost['trial-s med']:.1f}%, tokens "
          f"{100 * cost['trial-tokens']:.1f}%, FLOPs {100 * cost['FLOPs']:.1f}%, max |gap| "
          f"{np.nanmax(np.abs(tab['gap'])):.2f}, inside {int(tab['inside'].sum())}/{len(tab)}")


def main(argv: list[str] | None = None) -> int:
    p = store_parser(__doc__.split("\n\n")[0])
    p.add_argument("--search", type=yaml.safe_load, action="append", default=[],
                   metavar="YAML", help="another transfer-search setting to replay, e.g. "
                   "'{settle_octaves: 2.5}' (repeatable)")
    p.add_argument("--stop", type=float, action="append", default=[], metavar="OCTAVES",
                   help="also replay the default search with early stopping at this "
                   "protect_octaves (search.stop; repeatable)")
    p.add_argument("--real", type=Path, metavar="RUN_STORE", help="a real run of the default "
                   "search of the first STORE's sweep: compare it with its replay")
    args = p.parse_args(argv)
    if args.real is not None:
        real_run(args.stores[0], args.real)
        return 0
    VARIANTS.extend((f"transfer + stop p{o:g}", {"kind": "transfer"},
                     StopOptions(protect_octaves=o)) for o in args.stop)
    for extra in args.search:
        if not isinstance(extra, dict):
            p.error("--search: give a YAML mapping, e.g. '{settle_octaves: 2.5}'")
        VARIANTS.append((",".join(f"{k}={v}" for k, v in extra.items()),
                         {"kind": "transfer", **extra}, None))
    for spec in args.stores:
        one_store(spec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
