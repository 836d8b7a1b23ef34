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

from dataclasses import dataclass

import numpy as np

from mutransfer.analysis_defaults import FIT_WINDOW


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
