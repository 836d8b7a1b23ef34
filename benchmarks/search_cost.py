"""The transfer search against the full grid: what each costs and what each answers.

Runs one sweep file several ways on the same seeds, each into its own fresh storage: the full
grid, the transfer search (the file's `search:` when it is a transfer search, else the
defaults), and the transfer search with `probe_stability` (unless --no-probe). Then prints,
side by side (with the transfer search at `--also` settings, default settle_octaves 1.5,
replayed on the grid's results; benchmarks/search_targets.py replays against issue 29's
target): trials, trial-tokens, trial-seconds, wall time, lr* per
(family, width), the drift with its interval and the stability boundary, all from
`mutransfer.analysis.analyze` on each storage, and the differences against the grid, with the
issue's targets (<= 40% of the grid's trial-tokens, every lr* within 0.25 octave of the
grid's, drift inside the grid's interval).

    python benchmarks/search_cost.py                       # quickstart and search_cpu
    python benchmarks/search_cost.py --quick               # the quickstart only
    python benchmarks/search_cost.py sweeps/gpu_width.yaml --out /tmp/gpu  # any sweep file
    python benchmarks/search_cost.py sweeps/search_cpu.yaml --grid /tmp/x/search_cpu/grid \
        --replay --search '{settle_octaves: 1.5}'  # other settings, replayed on a grid run

`--replay-grids STORE...` trains nothing: it replays every variant (transfer search with and
without the probe, grid and transfer search with early stopping at several protect radii) on
finished grid stores (one per sweep and seed set) and prints one table per store with
trial-tokens, trial-seconds, the largest and the signed mean lr* gap to the grid, and whether
every drift lies in the grid's interval (benchmarks/search_replay.py says how a replay works).

    nice -n 19 python benchmarks/search_cost.py --replay-grids /tmp/g/search_cpu_s01 ...

On a shared machine run it under `flock /tmp/mt-heavy.lock`. Every run shares one local Ray
(started once), so Ray's start-up is in no run's wall time. `--replay` runs no search: it plays
the search's decisions against the grid's stored results (no training, no wall time), which
gives the same cells and answers as running it wherever training is deterministic (a run's
"same cells" line shows whether it was: equal losses for equal trial ids).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from mutransfer.analysis import Analysis, analyze
from mutransfer.commands.sweep import SweepArgs, run_sweep
from mutransfer.configbase import validate
from mutransfer.results.store import Tables, read_tables
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.run.cluster import ray_session
from mutransfer.sweep.run.progress import fmt_duration
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch

sys.path.insert(0, str(Path(__file__).parent))  # search_replay beside it

DEFAULT_SWEEPS = ["sweeps/quickstart.yaml", "sweeps/search_cpu.yaml"]
TOKEN_TARGET = 0.40   # share of the grid's trial-tokens
LR_TARGET = 0.25      # octaves between the search's lr* and the grid's


@dataclass
class Run:
    name: str
    rc: int
    wall_s: float
    trials: pd.DataFrame      # the trials table
    analysis: Analysis | None
    note: str = ""            # why there is no analysis
    replayed: bool = False    # decided from the grid's results, not run

    @property
    def done(self) -> pd.DataFrame:
        return self.trials[self.trials["status"].isin(["complete", "diverged"])]


def variants(doc: dict, probe: bool, overrides: dict | None = None) -> dict[str, dict]:
    """The sweep as a grid and as transfer searches (the file's own settings, then probing)."""
    base = {k: v for k, v in doc.items() if k not in ("search", "storage")}
    search = dict(doc.get("search") or {})
    if search.get("kind") != "transfer":
        search = {"kind": "transfer"}
    search.update(overrides or {})
    out = {"grid": base, "transfer": {**base, "search": {**search, "probe_stability": False}}}
    if probe:
        out["transfer+probe"] = {**base, "search": {**search, "probe_stability": True}}
    return out


def replay_name(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) + " (replay)"


def run_variant(name: str, doc: dict, root: Path) -> Run:
    storage = root / name.replace("+", "_")
    if storage.exists():
        sys.exit(f"{storage} exists: give a fresh --out folder")
    path = root / f"{storage.name}.yaml"
    path.write_text(yaml.safe_dump({**copy.deepcopy(doc), "storage": str(storage)},
                                   sort_keys=False))
    with open(root / f"{storage.name}.log", "w") as log:
        start = time.monotonic()
        rc = run_sweep(SweepArgs(str(path), analysis=False, out=log))
        wall = time.monotonic() - start
    trials = read_tables(storage).trials
    try:
        return Run(name, rc, wall, trials, analyze(storage))
    except Exception as exc:  # e.g. every trial failed: say so in the table
        return Run(name, rc, wall, trials, None, f"{type(exc).__name__}: {exc}")


def existing_grid(storage: Path) -> Run:
    """A grid already run (--grid): its wall time is not known."""
    trials = read_tables(storage).trials
    if trials.empty:
        sys.exit(f"{storage}: no trials there")
    return Run("grid", 0, math.nan, trials, analyze(storage))


def replay_variant(name: str, doc: dict, grid: Run, storage: Path) -> Run:
    """The cells the search would run, decided from the grid's results, and their analysis."""
    plan = build_plan(validate(SweepSpec, {**doc, "name": doc.get("name", "replay")}))
    rows = {str(r["trial_id"]): r for r in grid.done.to_dict("records")}
    search = TransferSearch.of_cells(plan.cells, plan.spec.search, {})
    running: list[str] = []
    while True:  # two at a time, the oldest finishing first, as on two workers
        while len(running) < 2 and (tid := search.next_trial()) is not None:
            running.append(tid)
        if not running:
            break
        tid = running.pop(0)
        if tid not in rows:
            search.fail(tid)  # the grid has no result for it (it failed there)
        else:
            search.finish(tid, Outcome.of_row(rows[tid]))
    ran = sorted(search.finished_here)
    tables = read_tables(storage)
    trials = grid.trials[grid.trials["trial_id"].isin(ran)].reset_index(drop=True)
    steps = tables.steps[tables.steps["trial_id"].isin(ran)].reset_index(drop=True)
    try:
        return Run(name, 0, math.nan, trials, analyze(storage, tables=Tables(trials, steps)),
                   replayed=True)
    except Exception as exc:
        return Run(name, 0, math.nan, trials, None, f"{type(exc).__name__}: {exc}",
                   replayed=True)


# -- the side-by-side tables --------------------------------------------------------------------

def fmt_share(value: float, ref: float) -> str:
    return f"{100 * value / ref:.1f}%" if ref else "-"


def cost_table(runs: list[Run]) -> pd.DataFrame:
    grid = runs[0]
    rows = {}
    for r in runs:
        d = r.done
        tokens = float(pd.to_numeric(d["tokens"]).sum())
        secs = float(pd.to_numeric(d["wall_time_s"]).sum())
        rows[r.name] = {
            "trials": len(d),
            "  share of grid": fmt_share(len(d), len(grid.done)),
            "trial-tokens": f"{tokens:,.0f}",
            "  share of grid ": fmt_share(tokens, float(pd.to_numeric(grid.done["tokens"]).sum())),
            "trial-seconds": f"{secs:,.0f}",
            "  share of grid  ": fmt_share(secs, float(pd.to_numeric(
                grid.done["wall_time_s"]).sum())),
            "wall time": fmt_duration(r.wall_s) if np.isfinite(r.wall_s) else "-",
            "failed trials": int((r.trials["status"] == "failed").sum()),
            "exit code": r.rc,
        }
    return pd.DataFrame(rows)


def _log2(x: float) -> float:
    return math.log2(x) if x and np.isfinite(x) and x > 0 else math.nan


def fmt_lr(lr: float, lo: float = math.nan, hi: float = math.nan, edge: str = "") -> str:
    if not np.isfinite(lr):
        return "-"
    text = f"{_log2(lr):+.2f}"
    if np.isfinite(lo) and np.isfinite(hi):
        text += f" [{_log2(lo):+.2f},{_log2(hi):+.2f}]"
    return text + (f" edge:{edge}" if edge else "")


def keyed(table: pd.DataFrame, cols: list[str]) -> dict[tuple, pd.Series]:
    return {tuple(row[c] for c in cols): row for _, row in table.iterrows()}


def lr_table(runs: list[Run]) -> tuple[pd.DataFrame, dict[str, float]]:
    """log2 lr* [the analysis's interval] per family and width, and the largest gap per search."""
    grid = runs[0].analysis
    assert grid is not None
    cols = grid.group_cols
    ref = keyed(grid.lr_opt, cols)
    worst = {r.name: 0.0 for r in runs[1:]}
    rows = []
    for key, g in ref.items():
        row = {c: k for c, k in zip(cols, key)}
        row["grid"] = fmt_lr(g["lr_opt"], g["ci_low"], g["ci_high"], g["edge_side"])
        for r in runs[1:]:
            other = keyed(r.analysis.lr_opt, cols).get(key) if r.analysis else None
            if other is None:
                row[r.name], row[f"diff {r.name}"] = "-", "-"
                worst[r.name] = math.inf
                continue
            row[r.name] = fmt_lr(other["lr_opt"], other["ci_low"], other["ci_high"],
                                 other["edge_side"])
            gap = _log2(other["lr_opt"]) - _log2(g["lr_opt"])
            row[f"diff {r.name}"] = f"{gap:+.2f}" if np.isfinite(gap) else "-"
            worst[r.name] = max(worst[r.name], abs(gap) if np.isfinite(gap) else math.inf)
        rows.append(row)
    return pd.DataFrame(rows), worst


def drift_table(runs: list[Run]) -> tuple[pd.DataFrame, dict[str, bool]]:
    """Slope of log2 lr* per doubling of width [the analysis's interval]; inside the grid's?"""
    grid = runs[0].analysis
    assert grid is not None
    cols = grid.family_cols
    ref = keyed(grid.drift, cols)
    inside = {r.name: True for r in runs[1:]}
    rows = []
    for key, g in ref.items():
        row = {c: k for c, k in zip(cols, key)}
        row["grid"] = f"{g['slope']:+.3f} [{g['ci_low']:+.3f},{g['ci_high']:+.3f}]"
        for r in runs[1:]:
            other = keyed(r.analysis.drift, cols).get(key) if r.analysis else None
            if other is None or not np.isfinite(other["slope"]):
                row[r.name] = "-"
                inside[r.name] = False
                continue
            ok = bool(g["ci_low"] <= other["slope"] <= g["ci_high"])
            inside[r.name] &= ok
            row[r.name] = (f"{other['slope']:+.3f} [{other['ci_low']:+.3f},"
                           f"{other['ci_high']:+.3f}] {'inside' if ok else 'OUTSIDE'}")
        rows.append(row)
    return pd.DataFrame(rows), inside


def fmt_boundary(row: pd.Series | None) -> str:
    if row is None:
        return "-"
    if np.isfinite(row["boundary"]):
        return f"{_log2(row['boundary']):+.2f}" + ("" if row["clean"] else " (ambiguous)")
    if np.isfinite(row["largest_trained"]):
        return f"> {_log2(row['largest_trained']):+.2f} (none diverged)"
    return f"< {_log2(row['smallest_diverged']):+.2f} (all diverged)"


def stability_table(runs: list[Run]) -> pd.DataFrame:
    """log2 of the stability boundary (between the largest LR that trained and the smallest
    that diverged), per family and width."""
    grid = runs[0].analysis
    assert grid is not None
    cols = grid.group_cols
    rows = []
    for key, g in keyed(grid.stability, cols).items():
        row = {c: k for c, k in zip(cols, key)}
        row["grid"] = fmt_boundary(g)
        for r in runs[1:]:
            other = keyed(r.analysis.stability, cols).get(key) if r.analysis else None
            row[r.name] = fmt_boundary(other)
        rows.append(row)
    return pd.DataFrame(rows)


def same_cells(runs: list[Run]) -> str:
    """Cells that two runs share have the same trial id: their losses should be equal."""
    grid = runs[0].done.set_index("trial_id")
    lines = []
    for r in runs[1:]:
        if r.replayed:
            lines.append(f"  {r.name}: replayed from the grid's results ({len(r.done)} cells)")
            continue
        other = r.done.set_index("trial_id")
        shared = grid.index.intersection(other.index)
        extra = len(other.index.difference(grid.index))
        a = pd.to_numeric(grid.loc[shared, "final_eval_loss"], errors="coerce")
        b = pd.to_numeric(other.loc[shared, "final_eval_loss"], errors="coerce")
        both = a.notna() & b.notna()
        diff = float((a[both] - b[both]).abs().max()) if both.any() else math.nan
        div = int((grid.loc[shared, "diverged"].astype(bool) !=
                   other.loc[shared, "diverged"].astype(bool)).sum())
        lines.append(f"  {r.name}: {len(shared)} of its {len(other)} cells are grid cells "
                     f"({extra} not); max |final loss difference| {diff:.3g}, "
                     f"diverged flag differs in {div}")
    return "\n".join(lines)


def targets(runs: list[Run], worst: dict[str, float], inside: dict[str, bool]) -> str:
    grid_tokens = float(pd.to_numeric(runs[0].done["tokens"]).sum())
    lines = []
    for r in runs[1:]:
        share = float(pd.to_numeric(r.done["tokens"]).sum()) / grid_tokens if grid_tokens else 0
        lines.append(
            f"  {r.name}: trial-tokens {100 * share:.1f}% of the grid's "
            f"({'met' if share <= TOKEN_TARGET else 'MISSED'}, target <= "
            f"{100 * TOKEN_TARGET:.0f}%); largest lr* gap {worst[r.name]:.2f} octave "
            f"({'met' if worst[r.name] <= LR_TARGET else 'MISSED'}, target <= {LR_TARGET}); "
            f"drift inside the grid's interval: {'yes' if inside[r.name] else 'NO'}")
    return "\n".join(lines)


def floor_note(doc: dict, runs: list[Run]) -> str:
    """What the full grid at the smallest width alone costs: the search's floor."""
    grid = runs[0].done
    if not len(grid):
        return ""
    smallest = int(grid["width"].min())
    share = (grid["width"] == smallest).mean()
    n_w = grid["width"].nunique()
    return (f"  the full grid at the smallest width ({smallest}) is {100 * share:.1f}% of the "
            f"grid's trials by itself ({n_w} widths)")


def report(path: str, doc: dict, runs: list[Run]) -> None:
    print(f"\n=== {doc.get('name')} ({path}) ===")
    for r in runs:
        if r.analysis is None:
            print(f"{r.name}: no analysis ({r.note})")
    print(cost_table(runs).to_string())
    if any(r.analysis is None for r in runs):
        return
    lrs, worst = lr_table(runs)
    print("\nlr* per family and width: log2 lr* [the analysis's 95% interval]; "
          "diff = search - grid, octaves")
    print(lrs.to_string(index=False))
    drift, inside = drift_table(runs)
    print("\ndrift: slope of log2 lr* against log2 width [the analysis's 95% interval]")
    print(drift.to_string(index=False))
    print("\nstability boundary: log2 of the geometric mean of the largest LR that trained and "
          "the smallest that diverged")
    print(stability_table(runs).to_string(index=False))
    print("\nsame cells:")
    print(same_cells(runs))
    print("\ntargets:")
    print(targets(runs, worst, inside))
    print(floor_note(doc, runs))


# the variants of --replay-grids: (name, search mapping, stopping options or None)
def replay_variants() -> list[tuple[str, dict, Any]]:
    from mutransfer.sweep.search.stopping import StopOptions

    out: list[tuple[str, dict, Any]] = [
        ("transfer", {"kind": "transfer"}, None),
        ("transfer+probe", {"kind": "transfer", "probe_stability": True}, None),
        ("transfer settle 1.5", {"kind": "transfer", "settle_octaves": 1.5}, None),
        ("transfer, issue 19's rule", {"kind": "transfer", "full_widths": 1,
                                       "settle_octaves": 2.5}, None)]
    for p in (2.5, 1.5, 1.0):
        out.append((f"grid+stop p{p:g}", {"kind": "grid"}, StopOptions(protect_octaves=p)))
    for p in (2.5, 1.5, 1.0):
        out.append((f"transfer+stop p{p:g}", {"kind": "transfer"},
                    StopOptions(protect_octaves=p)))
    # naive: no crossing allowance (stop whatever is behind at an eval point, outside 1 octave)
    out.append(("transfer+stop p1 naive", {"kind": "transfer"},
                StopOptions(protect_octaves=1.0, safety=0.0)))
    out.append(("grid+stop p1 naive", {"kind": "grid"},
                StopOptions(protect_octaves=1.0, safety=0.0)))
    return out


def replay_table(store: Path, seeds: list[int] | None = None) -> pd.DataFrame:
    """One row per variant replayed on the grid store `store` (see replay_variants), on the
    trials of `seeds` only when given."""
    from search_replay import replay

    grid = replay(store, "grid", {"kind": "grid"}, seeds=seeds)
    widths = sorted({int(r["width"]) for r in grid.rows})
    print(f"widths complete in the grid store: {widths}")
    ref = grid.analysis.lr_opt.set_index(grid.analysis.group_cols)
    dref = grid.analysis.drift.set_index(grid.analysis.family_cols)
    g_rows = pd.DataFrame(grid.rows)
    g_tok = float(pd.to_numeric(g_rows["tokens"]).sum())
    g_sec = float(pd.to_numeric(g_rows["wall_time_s"]).sum())
    rows = []
    for name, search, stop in [("grid", {"kind": "grid"}, None)] + replay_variants():
        r = grid if name == "grid" else replay(store, name, search, stop, seeds=seeds)
        df = pd.DataFrame(r.rows)
        row = {"variant": name, "trials": len(df),
               "stopped": int((df["status"] == "stopped").sum()),
               "trial-tokens": f"{100 * pd.to_numeric(df['tokens']).sum() / g_tok:.1f}%",
               "trial-seconds": f"{100 * pd.to_numeric(df['wall_time_s']).sum() / g_sec:.1f}%"}
        if r.analysis is None:
            rows.append({**row, "note": r.note})
            continue
        mine = r.analysis.lr_opt.set_index(r.analysis.group_cols)
        gaps = np.log2(mine["lr_opt"].reindex(ref.index).astype(float)) - \
            np.log2(ref["lr_opt"].astype(float))
        drift = r.analysis.drift.set_index(r.analysis.family_cols)["slope"].reindex(dref.index)
        has_ci = dref["ci_low"].notna() & dref["ci_high"].notna()
        inside = ((drift >= dref["ci_low"]) & (drift <= dref["ci_high"]))[has_ci].all()
        row.update({"max |gap|": f"{np.nanmax(np.abs(gaps)):.2f}" if gaps.notna().any() else "-",
                    "mean gap": f"{np.nanmean(gaps):+.3f}" if gaps.notna().any() else "-",
                    "missing lr*": int(gaps.isna().sum()),
                    "drift in grid CI": ("yes" if inside else "NO") + (
                        f" ({int((~has_ci).sum())} without CI)" if (~has_ci).any() else ""),
                    "drift": " ".join(f"{v:+.2f}" for v in drift.to_numpy(float))})
        rows.append(row)
    return pd.DataFrame(rows)


def replay_main(stores: list[Path], split_seeds: bool = False) -> int:
    for store in stores:
        sets: list[list[int] | None] = [None]
        if split_seeds:
            sets = [[int(s)] for s in sorted(read_tables(store).trials["seed"].unique())]
        for seeds in sets:
            which = "" if seeds is None else f", seed {seeds[0]} alone"
            print(f"\n=== {store}{which} (replayed; trial-seconds indicative, measured under "
                  f"load) ===")
            print(replay_table(store, seeds).to_string(index=False))
            sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweeps", nargs="*", help=f"sweep files (default: {' '.join(DEFAULT_SWEEPS)})")
    p.add_argument("--quick", action="store_true", help="the quickstart only")
    p.add_argument("--no-probe", action="store_true",
                   help="skip the transfer search with probe_stability")
    p.add_argument("--out", default=None,
                   help="folder for the storages and logs (default /tmp/search-cost-TIME)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    p.add_argument("--search", type=yaml.safe_load, default=None, metavar="YAML",
                   help="options for the transfer search, e.g. '{settle_octaves: 2, window: 5}'")
    p.add_argument("--grid", type=Path, default=None,
                   help="a finished grid storage of the (one) sweep file: run no grid")
    p.add_argument("--replay", action="store_true",
                   help="decide the searches from the grid's results instead of running them")
    p.add_argument("--also", type=yaml.safe_load, action="append", default=None,
                   metavar="YAML", help="more transfer-search settings, replayed on the grid's "
                   "results (repeatable; default: '{margin: 1}'; 'none' for none)")
    p.add_argument("--replay-grids", type=Path, nargs="+", default=None, metavar="STORE",
                   help="finished grid stores: replay every variant on each, train nothing")
    p.add_argument("--split-seeds", action="store_true",
                   help="with --replay-grids: replay each seed of each store alone")
    args = p.parse_args(argv)
    if args.replay_grids:
        return replay_main(args.replay_grids, args.split_seeds)
    also = [a for a in (args.also or [{"settle_octaves": 1.5}]) if a not in ("none", None)]
    if any(not isinstance(a, dict) for a in also):
        p.error("--also: give a YAML mapping, e.g. '{settle_octaves: 1.5}'")
    paths = args.sweeps or (DEFAULT_SWEEPS[:1] if args.quick else DEFAULT_SWEEPS)
    if args.grid is not None and len(paths) != 1:
        p.error("--grid goes with one sweep file")
    if args.search is not None and not isinstance(args.search, dict):
        p.error("--search: give a YAML mapping, e.g. '{settle_octaves: 2}'")
    out = Path(args.out or f"/tmp/search-cost-{time.strftime('%Y%m%dT%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    print(f"storages and sweep logs under {out}")
    trains = not (args.grid and args.replay)
    with ray_session(num_cpus=args.num_cpus) if trains else contextlib.nullcontext():
        for path in paths:
            doc = yaml.safe_load(Path(path).read_text())
            root = out / str(doc["name"])
            root.mkdir(exist_ok=True)
            docs = variants(doc, probe=not args.no_probe, overrides=args.search)
            grid = existing_grid(args.grid) if args.grid else run_variant("grid", docs["grid"],
                                                                           root)
            storage = args.grid or root / "grid"
            runs = [grid] + [replay_variant(name, d, grid, storage) if args.replay else
                             run_variant(name, d, root)
                             for name, d in docs.items() if name != "grid"]
            runs += [replay_variant(replay_name(extra), d, grid, storage)
                     for extra in also for d in [{**docs["transfer"], "search": {
                         **docs["transfer"]["search"], **extra}}]]
            report(path, doc, runs)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
