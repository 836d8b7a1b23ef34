"""Results tables over several scale axes (width, depth, training steps) and any target
hyperparameter, with a planted optimum per scale point: tests of analysis/choice.py, law.py.

The loss of a trial is a bowl in the target's coordinate (log2 of it, or the value itself for
a linear target) around the planted optimum, plus seed noise; the other axes are columns of
the trials table as a sweep writes them, and every trial's config JSON holds its steps, batch
size and sequence length (the tokens scale axis is derived from them).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

import numpy as np
import pandas as pd

from mutransfer.results.store import Tables
from tests.synthetic_sweeps import _trial_id, _trial_row

BATCH, SEQ = 4, 64


def axes_tables(points: dict[str, list], target: str, grid: list[float],
                optimum: Callable[[dict], float], seeds: list[int], noise: float = 0.01,
                log: bool = True, curvature: float = 0.04, fixed: dict | None = None,
                parameterization: str = "mup", rng_seed: int = 0) -> Tables:
    """Trials for every combination of `points` (axis column -> values; `width` is the model
    width, `train.steps` the steps) x target value in `grid` x seed. `optimum(point)` is the
    planted optimum of `target` (in its units); `fixed` adds constant columns (e.g. lr)."""
    rng = np.random.default_rng(rng_seed)
    names = list(points)
    rows = []
    for combo in itertools.product(*points.values()):
        point = dict(zip(names, combo))
        opt = optimum(point)
        for value in grid:
            dist = (np.log2(value) - np.log2(opt)) if log else (value - opt)
            for s in seeds:
                loss = float(3.0 + curvature * dist**2 + noise * rng.standard_normal())
                width = int(point.get("width", 64))
                extra = {k: v for k, v in {**(fixed or {}), **point, target: value}.items()
                         if k not in ("width", "lr")}
                lr = float(point.get("lr", value if target == "lr" else
                                     (fixed or {}).get("lr", 1e-3)))
                from tests.synthetic_sweeps import Planted

                p = Planted(parameterization, 1.0, 0.0, extra=extra)
                row = _trial_row(p, width, lr, s, loss, False, "grid")
                row["trial_id"] = _trial_id(parameterization, sorted(extra.items()), width,
                                            lr, s)
                steps = int(point.get("train.steps", 200))
                row["config"] = json.dumps({"train": {"steps": steps, "batch_size": BATCH,
                                                      "seq_len": SEQ, "tokens": None}})
                row["tokens"] = steps * BATCH * SEQ
                row["steps_done"] = steps
                rows.append(row)
    trials = pd.DataFrame(rows)
    trials["diverge_step"] = trials["diverge_step"].astype("Int64")
    return Tables(trials, pd.DataFrame())
