"""The divergence rule before and after issue 19: which high-LR trials each calls diverged, what
they end at, and what the new rule costs.

Runs the quickstart grid's cells above its LR range, up to lr 2^-1 (`--top`; both seeds, every
width), once each, under the current rule (`train.diverge_rule: final`: a finite loss never stops
a trial), recording every loss the divergence monitor is fed and when. The rule before issue 19
(a smoothed train loss above initial + 1 for 10 steps, or an eval loss above it while the
smoothed loss was too, or a non-finite loss) is then replayed on those losses: training is
deterministic and the monitor only watches, so the losses up to the step where the old rule
fired are the ones a run under it saw, and its trial-steps and trial-seconds are those up to
that step. Prints per trial: the old rule's verdict and step, the new status, the final eval
loss (last finite loss for a diverged trial), max_excursion and steps_above_bound; then the
compute the new rule spends on the trials the old one stopped.

    nice -n 19 python benchmarks/divergence_rule.py                # the quickstart, to 2^-1
    nice -n 19 python benchmarks/divergence_rule.py --widths 256 --eval-every 5

Trial-seconds are measured on whatever machine runs it (indicative on a shared one);
trial-steps do not depend on it.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
import yaml

from mutransfer import train as train_module
from mutransfer.config import TrialConfig
from mutransfer.configbase import validate
from mutransfer.divergence import DivergenceMonitor
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.spec import SweepSpec


class Recorder(DivergenceMonitor):
    """The current monitor, noting every loss it is fed: (kind, step, loss, seconds since
    the trial's first eval)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.events: list[tuple[str, int, float, float]] = []
        self.t0 = time.perf_counter()

    def train_loss(self, step: int, loss: float) -> bool:
        self.events.append(("train", step, loss, time.perf_counter() - self.t0))
        return super().train_loss(step, loss)

    def eval_loss(self, step: int, loss: float) -> bool:
        self.events.append(("eval", step, loss, time.perf_counter() - self.t0))
        return super().eval_loss(step, loss)


@dataclass
class OldRule:
    """The rule before issue 19 (mutransfer/divergence.py at 0783538), for replay."""

    initial: float
    threshold: float = 1.0
    smoothing: float = 0.9
    patience: int = 10
    ema: float = field(init=False)
    above: int = 0

    def __post_init__(self) -> None:
        self.bound, self.ema = self.initial + self.threshold, self.initial

    def replay(self, events: list[tuple[str, int, float, float]]) -> tuple[int | None, str]:
        """(step it fired at, reason), or (None, "") when it never did."""
        for kind, step, loss, _ in events:
            if not math.isfinite(loss):
                return step, f"non-finite {kind} loss"
            if kind == "train":
                self.ema = self.smoothing * self.ema + (1 - self.smoothing) * loss
                self.above = self.above + 1 if self.ema > self.bound else 0
                if self.above >= self.patience:
                    return step, "smoothed train loss above the bound for 10 steps"
            elif loss > self.bound and self.ema > self.bound:
                return step, "eval loss and smoothed train loss above the bound"
        return None, ""


@dataclass
class Row:
    parameterization: str
    width: int
    log2_lr: float
    seed: int
    initial: float
    old_step: int | None
    old_reason: str
    status: str
    loss: float
    max_excursion: float
    steps_above: int
    steps_new: int
    steps_old: int
    seconds_new: float
    seconds_old: float


def cell_key(cell: Any) -> str:
    c = cell.columns
    return f"{c['parameterization']}:{int(c['width'])}:{math.log2(c['lr']):g}:{int(c['seed'])}"


def extended_cells(path: str, top: float, widths: set[int] | None,
                   eval_every: int | None) -> list[Any]:
    """The cells of the sweep file above each parameterization's LR range, up to 2^top."""
    doc = yaml.safe_load(open(path))
    lr_axis = doc["axes"]["lr"]
    tops = {}
    for name, rng in lr_axis.items():
        tops[name] = rng["log2"][1]
        rng["log2"] = [rng["log2"][0], top]
    if eval_every:
        doc["train"]["eval_every"] = eval_every
    plan = build_plan(validate(SweepSpec, doc))
    out = []
    for cell in plan.cells:
        c = cell.columns
        if math.log2(c["lr"]) > tops[c["parameterization"]] + 1e-9 and \
                (widths is None or int(c["width"]) in widths):
            out.append(cell)
    # widest first, sp first: the cells the issue measured (sp width 256) come out soonest
    return sorted(out, key=lambda c: (-int(c.columns["width"]),
                                      c.columns["parameterization"] != "sp",
                                      c.columns["lr"], c.columns["seed"]))


def run_cell(cell: Any) -> Row:
    config = TrialConfig.model_validate(cell.config)
    t = config.train
    seen: list[Recorder] = []

    def monitor(cfg: TrialConfig, initial: float) -> Recorder:
        m = Recorder(initial, t.diverge_delta, t.diverge_smoothing, t.diverge_patience,
                     t.diverge_rule)
        seen.append(m)
        return m

    original = train_module._monitor
    train_module._monitor = monitor
    try:
        start = time.perf_counter()
        result = train_module.run_trial(config)
        seconds = time.perf_counter() - start
    finally:
        train_module._monitor = original
    rec = seen[-1]
    old_step, reason = OldRule(result.initial_loss, t.diverge_delta, t.diverge_smoothing,
                               t.diverge_patience).replay(rec.events)
    build_s = seconds - (rec.events[-1][3] if rec.events else 0.0)  # build + initial eval
    if old_step is None:
        steps_old, seconds_old = result.steps_done, seconds
    else:
        at = [e[3] for e in rec.events if e[1] == old_step]
        steps_old, seconds_old = old_step - 1, build_s + (at[0] if at else 0.0)
    loss = result.final_eval_loss if result.final_eval_loss is not None \
        else result.last_finite_loss
    c = cell.columns
    return Row(c["parameterization"], int(c["width"]), math.log2(c["lr"]), int(c["seed"]),
               result.initial_loss, old_step, reason, result.status, float(loss),
               result.max_excursion, result.steps_above_bound, result.steps_done, steps_old,
               seconds, seconds_old)


def fmt_row(r: Row) -> str:
    old = f"diverged@{r.old_step}" if r.old_step is not None else "complete"
    return (f"{r.parameterization:8s} {r.width:5d} 2^{r.log2_lr:+.0f} {r.seed:4d} "
            f"{r.initial:7.3f} {old:>14s} {r.status:>9s} {r.loss:8.3f} "
            f"{r.max_excursion:9.2f} {r.steps_above:6d} {r.steps_old:5d} {r.steps_new:5d} "
            f"{r.seconds_old:7.1f} {r.seconds_new:7.1f}  {r.old_reason}")


def summary(rows: list[Row], grid_steps: int) -> list[str]:
    """`grid_steps`: trial-steps of the whole extended grid when nothing stops early."""
    stopped = [r for r in rows if r.old_step is not None]
    now_complete = [r for r in stopped if r.status == "complete"]
    extra_steps = sum(r.steps_new - r.steps_old for r in stopped)
    extra_s = sum(r.seconds_new - r.seconds_old for r in stopped)
    all_steps = sum(r.steps_new for r in rows)
    all_s = sum(r.seconds_new for r in rows)
    return [
        f"trials run: {len(rows)}; the old rule stopped {len(stopped)}; of those the new rule "
        f"keeps {len(now_complete)} complete, {len(stopped) - len(now_complete)} diverged",
        f"new rule, diverged: {sum(r.status == 'diverged' for r in rows)}; complete with a "
        f"spike above the bound (unstable but trained): "
        f"{sum(r.status == 'complete' and r.steps_above > 0 for r in rows)}",
        f"extra compute on the trials the old rule stopped: {extra_steps} trial-steps "
        f"({extra_steps / max(all_steps, 1):.1%} of these {all_steps}; "
        f"{extra_steps / max(grid_steps, 1):.1%} of the extended grid's {grid_steps}), "
        f"{extra_s:.1f} trial-seconds "
        f"({extra_s / max(all_s, 1e-9):.1%} of these {all_s:.1f} s)",
    ]


def parse_rows(path: str) -> list[Row]:
    """The rows a previous run printed (its output file), to re-summarize without training."""
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) < 14 or not f[2].startswith("2^") or not f[1].isdigit():
            continue
        old_step = None if f[5] == "complete" else int(f[5].split("@")[1])
        rows.append(Row(f[0], int(f[1]), float(f[2][2:]), int(f[3]), float(f[4]), old_step,
                        " ".join(f[14:]), f[6], float(f[7]), float(f[8]), int(f[9]),
                        int(f[11]), int(f[10]), float(f[13]), float(f[12])))
    return rows


def stability_report(rows: list[Row], tops: dict[str, float]) -> list[str]:
    """The stability tables (mutransfer.analysis.stability) of the extended grid under each
    rule: every LR of the file's own range counts as trained (none of them leaves its bound
    under either rule on the quickstart: docs/results-format.md, "Divergence")."""
    from mutransfer.analysis.cells import DIVERGED, PARTIAL, TRAINED
    from mutransfer.analysis.stability import stability_slope_table, stability_table

    out = []
    for rule in ("old", "new"):
        cells = []
        for (param, width), group in _by(rows, lambda r: (r.parameterization, r.width)).items():
            cells.append({"parameterization": param, "width": width,
                          "lr": 2.0 ** tops[param], "status": TRAINED})
            for lr, at in _by(group, lambda r: r.log2_lr).items():
                div = [(r.old_step is not None) if rule == "old" else r.status == "diverged"
                       for r in at]
                status = DIVERGED if all(div) else PARTIAL if any(div) else TRAINED
                cells.append({"parameterization": param, "width": width, "lr": 2.0**lr,
                              "status": status})
        st = stability_table(pd.DataFrame(cells), ["parameterization", "width"])
        slope = stability_slope_table(st, ["parameterization"])
        out.append(f"{rule} rule: stability brackets (largest trained .. first diverged)")
        for _, r in st.iterrows():
            out.append(f"  {r['parameterization']:8s} {int(r['width']):4d}  "
                       f"2^{math.log2(r['largest_trained']):+.0f} .. "
                       + (f"2^{math.log2(r['smallest_any_diverged']):+.0f}"
                          if math.isfinite(r["smallest_any_diverged"]) else "(none)"))
        for _, r in slope.iterrows():
            out.append(f"  slope {r['parameterization']:8s} {r['slope']:+.3f}  OLS "
                       f"[{r['ols_low']:+.3f}, {r['ols_high']:+.3f}]  brackets "
                       f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]  {r['note']}")
    return out


def _by(items: list, key) -> dict:
    out: dict = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return dict(sorted(out.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", nargs="?", default="sweeps/quickstart.yaml")
    ap.add_argument("--top", type=float, default=-1.0, help="log2 of the largest LR")
    ap.add_argument("--widths", type=int, nargs="*", help="only these widths")
    ap.add_argument("--eval-every", type=int, help="override train.eval_every")
    ap.add_argument("--cells", nargs="*", help="only these, as param:width:log2lr:seed "
                    "(e.g. sp:256:-3:0), in this order")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--rows", help="summarize the rows a previous run printed (its output "
                    "file) instead of training")
    args = ap.parse_args()
    tops = {name: rng["log2"][1]
            for name, rng in yaml.safe_load(open(args.sweep))["axes"]["lr"].items()}
    torch.set_num_threads(args.threads)
    cells = extended_cells(args.sweep, args.top, set(args.widths) if args.widths else None,
                           args.eval_every)
    if args.cells:
        by_key = {cell_key(c): c for c in cells}
        unknown = [k for k in args.cells if k not in by_key]
        if unknown:
            raise SystemExit(f"--cells: not above the grid's LR range: {', '.join(unknown)}")
        cells = [by_key[k] for k in args.cells]
    doc = yaml.safe_load(open(args.sweep))
    base = build_plan(validate(SweepSpec, doc))
    base_steps = sum(TrialConfig.model_validate(c.config).train.total_steps for c in base.cells)
    extended = extended_cells(args.sweep, args.top, None, args.eval_every)
    n_extended = len(extended)
    grid_steps = base_steps + sum(TrialConfig.model_validate(c.config).train.total_steps
                                  for c in extended)
    if args.rows:
        rows = parse_rows(args.rows)
        for line in summary(rows, grid_steps) + stability_report(rows, tops):
            print(line)
        return
    print(f"{len(cells)} of the {n_extended} cells above the grid's LR range, up to "
          f"2^{args.top:+.0f}; the grid itself: {len(base.cells)} cells, {base_steps} "
          f"trial-steps")
    print("param    width   lr  seed initial     old rule    new  final  max_exc  above "
          "st_old st_new  s_old  s_new  old reason")
    rows = []
    for cell in cells:
        rows.append(run_cell(cell))
        print(fmt_row(rows[-1]), flush=True)
    for line in summary(rows, grid_steps) + stability_report(rows, tops):
        print(line)


if __name__ == "__main__":
    main()
