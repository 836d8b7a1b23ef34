"""Early stopping of LR-sweep trials that keeps lr* where it is: the rule, as pure functions.

Naive early stopping biases an LR sweep: high LRs lead early and lose late, so a rule that
stops what is behind at an early eval point moves lr* up (short-horizon bias). This rule stops a
trial at an eval point only when both hold:

- its LR is at least `protect_octaves` from the best LR at the same width, seed and step (never
  the best LR; never the LRs the analysis's fit weighs most, those near the optimum);
- its loss is worse than that best LR's at the same step, paired on the seed, by more than the
  *crossing allowance* of that eval point: the most any LR's gap to the best has shrunk between
  that point and the end on the curves already complete at other widths of the family, times
  `safety`. A gap larger than that has never been closed by the end on the curves seen.

With `protect_octaves` equal to the analysis's fit window (FIT_WINDOW) no LR the fit weighs is
ever stopped, and lr* cannot move; smaller values save more and may move it
(benchmarks/search_cost.py measures how far). The rule only truncates a trial, so it can be
replayed exactly on the stored step curves of a full grid.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from mutransfer.analysis_defaults import FIT_WINDOW
from mutransfer.config import TrainConfig  # downward: a run's length in steps
from mutransfer.results.store import Store
from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.search.families import families_of


@dataclass(frozen=True)
class StopOptions:
    protect_octaves: float = FIT_WINDOW  # LRs nearer than this to the step's best run on
    safety: float = 1.0                  # multiplies the crossing allowance


def crossing_allowance(curves: list[np.ndarray]) -> np.ndarray:
    """(E,) per eval point, the largest shrink of an LR's gap to the best LR from that point to
    the last one, over complete curves: each (L, E) is one width and seed's LRs by eval
    points (NaN: diverged or not there). The last point's allowance is 0. NaN where no curve
    informs a point (nothing is stopped there)."""
    if not curves:
        return np.array([])
    n_e = max(c.shape[1] for c in curves)
    out = np.full(n_e, np.nan)
    for y in curves:
        ok = np.isfinite(y).all(axis=1)  # LRs that trained to the end
        if ok.sum() < 2:
            continue
        yy = y[ok]
        gaps = yy - yy.min(axis=0, keepdims=True)          # (L', E) gap to each point's best
        shrink = (gaps - gaps[:, -1:]).max(axis=0)         # how much a gap closed by the end
        out[: y.shape[1]] = np.fmax(out[: y.shape[1]], np.maximum(shrink, 0.0))
    return out


def should_stop(log2_lr: float, loss: float, peers_log2_lr: np.ndarray, peers_loss: np.ndarray,
                allowance: float, options: StopOptions) -> bool:
    """Stop a trial at one eval point? `peers_*`: the LRs of the same width and seed that have
    reached this point (the trial itself may be among them) and their losses there."""
    if not (np.isfinite(loss) and np.isfinite(allowance)):
        return False
    ok = np.isfinite(peers_loss)
    if not ok.any():
        return False
    b = int(np.argmin(np.where(ok, peers_loss, np.inf)))
    best_x, best_y = float(peers_log2_lr[b]), float(peers_loss[b])
    if loss <= best_y or abs(log2_lr - best_x) < options.protect_octaves:
        return False
    return loss - best_y > options.safety * allowance


# -- live: what a trial needs on its worker, and the decision read from the store -------------

@dataclass(frozen=True)
class StopContext:
    """A trial's place in its family: its LR, the trials of its width and seed (its peers) and
    those of the family's other widths, by trial id with their log2 LR."""

    log2_lr: float
    final_step: int
    peers: dict[str, float]
    others: dict[str, tuple[int, str, float]]  # id -> (width, seed as JSON, log2 LR)
    options: StopOptions


def stop_contexts(cells: list[Cell], protect_octaves: float, safety: float
                  ) -> dict[str, StopContext]:
    """The context of every cell (the grid's families, as the transfer search splits them)."""
    options = StopOptions(protect_octaves, safety)
    steps = {c.trial_id: last_step(c) for c in cells}
    out: dict[str, StopContext] = {}
    for fam in families_of(cells):
        x = [math.log2(lr) for lr in fam.lrs]
        where = {tid: (w, json.dumps(s, sort_keys=True), x[i])
                 for (w, i, s), tid in fam.ids.items()}
        for tid, (w, s, xi) in where.items():
            peers = {t: v[2] for t, v in where.items() if v[0] == w and v[1] == s and t != tid}
            others = {t: v for t, v in where.items() if v[0] != w}
            out[tid] = StopContext(xi, steps[tid], peers, others, options)
    return out


def last_step(cell: Cell) -> int:
    """The step of a cell's last eval point: its run's length in steps, which `train.tokens`
    sets where given (`train.steps` is then not what runs; TrainConfig.total_steps)."""
    return TrainConfig.model_construct(**cell.config["train"]).total_steps


def read_curves(store: Store, ids: set[str]) -> dict[str, dict[int, float]]:
    """Eval loss by step of the trials `ids`, from the store's step parts (finished attempts
    and running ones); the last part read wins a step."""
    out: dict[str, dict[int, float]] = {}
    paths = store.list_parts(store.steps_dir) + store.list_parts(store.running_dir)
    for path in paths:
        tid = path.rsplit("/", 1)[1][len("part-"):].split("-")[0]
        if tid not in ids:
            continue
        try:
            df = store.read_part(path)
        except Exception:  # a part being written or set aside: the next eval point reads it
            continue
        curve = out.setdefault(tid, {})
        for step, loss in zip(df["step"], df["eval_loss"]):
            if loss is not None and np.isfinite(loss):
                curve[int(step)] = float(loss)
    return out


def decide(ctx: StopContext, store: Store, step: int, loss: float | None) -> bool:
    """Stop this trial at `step`, with eval `loss`, given what the store holds now?"""
    if loss is None or not np.isfinite(loss) or step <= 0 or step >= ctx.final_step:
        return False
    curves = read_curves(store, set(ctx.peers) | set(ctx.others))
    by_ws: dict[tuple[int, str], list[dict[int, float]]] = {}
    for tid, (w, s, _) in ctx.others.items():
        c = curves.get(tid)
        if c and ctx.final_step in c:  # complete: it reached the last eval point
            by_ws.setdefault((w, s), []).append(c)
    grid = sorted({k for cs in by_ws.values() for c in cs for k in c})
    if step not in grid:
        return False
    mats = [np.array([[c.get(k, np.nan) for k in grid] for c in cs]) for cs in by_ws.values()]
    allowance = crossing_allowance(mats)
    e = grid.index(step)
    px = [ctx.log2_lr] + [x for t, x in ctx.peers.items() if step in curves.get(t, {})]
    py = [loss] + [curves[t][step] for t in ctx.peers if step in curves.get(t, {})]
    return should_stop(ctx.log2_lr, float(loss), np.array(px), np.array(py),
                       float(allowance[e]) if e < len(allowance) else float("nan"), ctx.options)
