"""Horizon branching against separate runs: what each costs and whether each answers the same.

Runs one sweep file twice, each into its own fresh storage: with horizon branching (the
file as it is: cells that differ only in train.steps, schedule wsd, share one trunk) and with
`train.branch: false` (every length trained separately). Then prints the trial-tokens (tokens
actually trained: a branched cell counts from its branch step), the trial-seconds (the rows'
wall_time_s: a branched cell's counts from its branch point), the ratio of each (target
<= 0.70 for lengths T, 2T, 4T at cooldown 0.2; the floor is 4.6T/7T = 0.657), the largest
|difference| of final losses over cells (target 0 on CPU: the trial ids are the same both
ways), and lr* per (length, width) from `mutransfer.analysis.analyze` on each storage.

    nice -n 19 python benchmarks/horizon_cost.py sweeps/horizon.yaml --out /tmp/horizon-cost
    # a smaller run of the same design (any dotted field of the file, value as YAML):
    python benchmarks/horizon_cost.py sweeps/horizon.yaml --set 'axes.width=[32]' \
        --set 'axes.seed=[0]'

Both runs share one local Ray (started once), so its start-up is in neither run's wall time.
`--in-process` runs the same two phases without Ray, one cell after another in this process
(the same `run_unit` each Ray worker calls): for a machine too loaded to start Ray.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from mutransfer.analysis import analyze
from mutransfer.configbase import parse_set, set_dotted
from mutransfer.results.store import read_tables
from mutransfer.sweep.run.cluster import ray_session
from mutransfer.sweep.run.driver import run

TOKEN_TARGET = 0.70


def trained_tokens(trials: pd.DataFrame) -> pd.Series:
    """Tokens each row's run trained itself: steps done after its branch step."""
    start = trials["branch_step"].fillna(0).astype(float)
    per_step = trials["planned_tokens"] / trials["config"].map(_steps)
    done = (trials["steps_done"].astype(float) - start).clip(lower=0)
    return done * per_step


def _steps(config_json: str) -> int:
    import json

    from mutransfer.config import TrainConfig

    return TrainConfig.model_validate(json.loads(config_json)["train"]).total_steps


def lr_star(store: Path) -> pd.DataFrame:
    """lr* per (length, width) from the analysis (the train.steps axis is a group column)."""
    a = analyze(store)
    df = a.lr_opt.copy()
    keep = [c for c in df.columns if c in ("parameterization", "train.steps", "steps", "width",
                                           "lr_opt", "lr_lo", "lr_hi")]
    return df[keep]


def one(doc: dict, storage: Path, label: str, in_process: bool = False
        ) -> tuple[pd.DataFrame, float]:
    if storage.exists():
        shutil.rmtree(storage)
    t0 = time.monotonic()
    if in_process:
        run_in_process(doc, storage)
    else:
        result = run(doc, storage=str(storage), out=sys.stderr)
        if not result.ok:
            raise SystemExit(f"{label}: the sweep did not finish ({result})")
    wall = time.monotonic() - t0
    return read_tables(storage).trials, wall


def run_in_process(doc: dict, storage: Path) -> None:
    """The sweep's phases (trunks and other cells, then branches), each cell by `run_unit`."""
    from mutransfer.results.store import Store, StoreState
    from mutransfer.sweep.run.driver import prepare
    from mutransfer.sweep.run.horizon import attach, phases
    from mutransfer.sweep.run.runner import units_of
    from mutransfer.sweep.run.trainable import run_unit
    from mutransfer.sweep.search.registry import plan_work

    plan = prepare(doc, str(storage))
    store = Store(plan.spec.storage_location)
    work = plan_work(plan, store.scan(repair=False) if store.exists() else StoreState())
    attach(plan, work)
    units = units_of(plan, work)
    for cells in phases(work):
        for cell in cells:
            metrics = run_unit(units[cell.trial_id], store.location, plan.spec.name)
            print(f"  {cell.trial_id} {metrics['status']} {metrics['final_eval_loss']:.4f} "
                  f"(resumed from {metrics['resumed_from']})", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--out", default="/tmp/horizon-cost")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--num-cpus", type=int, default=None)
    ap.add_argument("--in-process", action="store_true", help="no Ray: cells one by one")
    args = ap.parse_args(argv)
    doc = yaml.safe_load(Path(args.sweep).read_text())
    for key, value in parse_set(args.set):
        set_dotted(doc, key, value)
    separate = copy.deepcopy(doc)
    separate.setdefault("train", {})["branch"] = False
    out = Path(args.out)
    session = contextlib.nullcontext() if args.in_process else \
        ray_session(None, args.num_cpus, None)
    with session:
        branched_rows, branched_wall = one(doc, out / "branched", "branched", args.in_process)
        separate_rows, separate_wall = one(separate, out / "separate", "separate",
                                           args.in_process)
    tok_b, tok_s = trained_tokens(branched_rows).sum(), trained_tokens(separate_rows).sum()
    sec_b, sec_s = branched_rows["wall_time_s"].sum(), separate_rows["wall_time_s"].sum()
    cols = ["trial_id", "final_eval_loss", "status", "diverge_step"]
    both = branched_rows[cols].merge(separate_rows[cols], on="trial_id", how="outer",
                                     suffixes=("", "_sep"))
    diff = (both["final_eval_loss"] - both["final_eval_loss_sep"]).abs()
    same_status = (both["status"] == both["status_sep"]).all()
    n_branched = int(branched_rows["branched_from"].notna().sum())
    print(f"sweep {args.sweep} {' '.join(args.set)}: {len(branched_rows)} cells, "
          f"{n_branched} of them branched")
    print(f"{'':12}{'trial-tokens':>14}{'trial-seconds':>15}{'wall s':>9}")
    print(f"{'branched':12}{tok_b:>14,.0f}{sec_b:>15.1f}{branched_wall:>9.1f}")
    print(f"{'separate':12}{tok_s:>14,.0f}{sec_s:>15.1f}{separate_wall:>9.1f}")
    ratio = tok_b / tok_s
    print(f"{'ratio':12}{ratio:>14.3f}{sec_b / sec_s:>15.3f}{branched_wall / separate_wall:>9.3f}"
          f"   (target <= {TOKEN_TARGET}: {'met' if ratio <= TOKEN_TARGET else 'NOT met'})")
    print(f"largest |final loss difference| per cell: {diff.max():.3g} "
          f"(cells compared: {int(diff.notna().sum())}; same status everywhere: {same_status})")
    lb, ls = lr_star(out / "branched"), lr_star(out / "separate")
    keys = [c for c in lb.columns if c not in ("lr_opt", "lr_lo", "lr_hi")]
    table = lb.merge(ls, on=keys, suffixes=("_branched", "_separate"))
    print("lr* per length and width:")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    same = (table["lr_opt_branched"] == table["lr_opt_separate"]).all()
    print(f"identical lr*: {bool(same)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
