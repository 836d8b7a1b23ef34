"""Results tables with planted truths (optimal LR, stability boundary), for tests and demos.

Each family's final loss is a bowl in log2 LR around lr*(w) = lr*_base * (w / w_base)^exponent,
plus seed noise (and optionally an offset per seed, the same at every LR); every LR above
stable(w) = stable_base * (w / w_base)^stable_exponent diverges. A diverged trial is stored as
the trainer stores one: no final or best loss, its last finite loss apart.
Written in the layout of docs/results-format.md, so the analysis cannot tell it from a sweep.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mutransfer.results.fs import write_part_atomic
from mutransfer.results.store import TRIAL_COLUMNS, Tables

INITIAL_LOSS = 5.5
EVAL_EVERY = 20
STEPS = 200


@dataclass
class Planted:
    parameterization: str
    lr_opt_base: float            # lr* at the base width
    exponent: float               # lr* ~ width^exponent
    stable_base: float = np.inf   # LRs above this diverge at the base width
    stable_exponent: float = 0.0
    loss_base: float = 3.0        # best loss at the base width
    loss_per_doubling: float = -0.05
    curvature: float = 0.04       # loss rise per squared octave away from lr*
    extra: dict[str, object] = field(default_factory=dict)  # extra axis columns

    def lr_opt(self, width: int, base: int) -> float:
        return self.lr_opt_base * (width / base) ** self.exponent

    def stable(self, width: int, base: int) -> float:
        return self.stable_base * (width / base) ** self.stable_exponent

    def best_loss(self, width: int, base: int) -> float:
        return self.loss_base + self.loss_per_doubling * np.log2(width / base)


def _trial_id(*parts: object) -> str:
    return hashlib.sha1(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:12]


def _trial_row(p: Planted, width: int, lr: float, seed: int, loss: float,
               diverged: bool, search: str) -> dict:
    tid = _trial_id(p.parameterization, p.extra, width, lr, seed)
    div_step = STEPS // 2 if diverged else None
    final = None if diverged else loss  # a diverged trial reports no loss it did not reach
    row = {
        "trial_id": tid, "sweep": "synthetic", "width": width,
        "parameterization": p.parameterization, "lr": lr, "seed": seed, "optimizer": "adam",
        **p.extra, "status": "diverged" if diverged else "complete", "diverged": diverged,
        "diverge_step": div_step, "final_eval_loss": final, "best_eval_loss": final,
        "last_finite_loss": 2 * INITIAL_LOSS if diverged else None,
        "initial_loss": INITIAL_LOSS, "steps_done": div_step or STEPS, "tokens": STEPS * 4096,
        "wall_time_s": 1.0, "tokens_per_s": 4096.0 * STEPS, "search": search, "host": "synthetic",
        "versions": "{}", "config": "{}", "attempt": tid[:6], "error": None,
        "evals": len(range(0, (div_step or STEPS) + 1, EVAL_EVERY)),
    }
    # any column the store adds later is present (empty), so it is never taken for an axis
    return {**{c: None for c in TRIAL_COLUMNS}, **row}


def _step_rows(tid: str, attempt: str, lr: float, final: float,
               diverged: bool) -> list[dict]:
    """Eval loss decaying from the initial loss to `final`, or blowing up half-way."""
    rows = []
    last = STEPS // 2 if diverged else STEPS
    for step in range(0, last + 1, EVAL_EVERY):
        frac = np.exp(-step / (STEPS / 5))
        loss = final + (INITIAL_LOSS - final) * frac
        if diverged:
            loss = INITIAL_LOSS * (1 + step / STEPS)
        rows.append({"trial_id": tid, "step": step, "tokens": step * 4096, "train_loss": loss,
                     "eval_loss": loss, "lr": lr, "grad_norm": 1.0, "tokens_per_s": 4096.0,
                     "attempt": attempt})
    return rows


def synthetic_tables(families: list[Planted], widths: list[int], lrs: list[float] | None,
                     seeds: list[int], noise: float = 0.005, rng_seed: int = 0,
                     random_lrs: tuple[float, float, int] | None = None,
                     seed_sd: float = 0.0) -> Tables:
    """Trials and steps for every family x width x LR x seed.

    `lrs` is the grid; with `random_lrs=(low, high, n)` each (family, width) instead gets n
    log-uniform LRs of its own, as an Optuna search would choose them. `seed_sd`: sd of an
    offset per (family, seed) added at every width and LR (a seed that runs high everywhere).
    """
    rng = np.random.default_rng(rng_seed)
    offset_rng = np.random.default_rng([rng_seed, 1])  # apart, so seed_sd=0 changes nothing
    base = widths[0]
    trials, steps = [], []
    for p in families:
        offset = dict(zip(seeds, seed_sd * offset_rng.standard_normal(len(seeds))))
        for w in widths:
            grid = lrs
            if random_lrs is not None:
                lo, hi, n = random_lrs
                grid = sorted(2.0 ** rng.uniform(np.log2(lo), np.log2(hi), n))
            for lr in grid:
                dist = np.log2(lr) - np.log2(p.lr_opt(w, base))
                mean = p.best_loss(w, base) + p.curvature * dist**2
                for s in seeds:
                    diverged = bool(lr > p.stable(w, base))
                    loss = float(mean + offset[s] + noise * rng.standard_normal())
                    row = _trial_row(p, w, float(lr), s, loss, diverged,
                                     "optuna" if random_lrs else "grid")
                    trials.append(row)
                    steps += _step_rows(row["trial_id"], row["attempt"], float(lr), loss,
                                        diverged)
    trials_df = pd.DataFrame(trials)
    trials_df["diverge_step"] = trials_df["diverge_step"].astype("Int64")
    return Tables(trials_df, pd.DataFrame(steps))


def write_results(root: str | Path, tables: Tables, per_trial: bool = False) -> Path:
    """Write `tables` under `root` in the store's layout: one part per trial, or one in all
    (the reader concatenates parts, and one part keeps large test tables fast)."""
    root = Path(root)
    if not per_trial:
        write_part_atomic(tables.trials, root / "trials" / "part-all.parquet")
        if len(tables.steps):
            write_part_atomic(tables.steps, root / "steps" / "part-all.parquet")
        return root
    for tid, row in tables.trials.groupby("trial_id", sort=False):
        write_part_atomic(row, root / "trials" / f"part-{tid}.parquet")
    for (tid, attempt), rows in tables.steps.groupby(["trial_id", "attempt"], sort=False):
        write_part_atomic(rows, root / "steps" / f"part-{tid}-{attempt}.parquet")
    return root
