"""When a trial has diverged: the rule, fed one loss at a time by the training loop.

A trial has diverged when
  1. a train or eval loss is not finite (at once), or
  2. the smoothed train loss (an EMA, started at the initial eval loss) has stayed above
     initial loss + `threshold` for `patience` consecutive steps, or
  3. an eval loss is above that bound while the smoothed train loss is above it too (held-out
     data and the training stream agree: no need to wait out the patience window).
A single minibatch above the bound is not divergence: warm-up spikes recover within a few steps
(docs/results-format.md, "Divergence", has the measurements behind the defaults).

The state is plain numbers (`state_dict`), so a checkpoint carries it and a resumed trial
judges exactly as an uninterrupted one.
"""

from __future__ import annotations

import math
from typing import Any


class DivergenceMonitor:
    """Feed it every train loss (`train_loss`) and every eval loss (`eval_loss`); each returns
    True once the trial has diverged, and `diverged_at` holds the step."""

    def __init__(self, initial_loss: float, threshold: float, smoothing: float, patience: int):
        self.bound = initial_loss + threshold
        self.smoothing, self.patience = smoothing, patience
        self.ema = initial_loss
        self.above = 0  # consecutive steps with the EMA above the bound
        self.last_finite = initial_loss  # last finite loss before the step that diverged
        self.diverged_at: int | None = None
        self.reason: str | None = None

    def train_loss(self, step: int, loss: float) -> bool:
        if not math.isfinite(loss):
            return self._diverge(step, "non-finite train loss")
        self.ema = self.smoothing * self.ema + (1 - self.smoothing) * loss
        self.above = self.above + 1 if self.ema > self.bound else 0
        if self.above >= self.patience:
            return self._diverge(step, f"smoothed train loss above {self.bound:.4g} for "
                                       f"{self.above} steps")
        self.last_finite = loss
        return False

    def eval_loss(self, step: int, loss: float) -> bool:
        if not math.isfinite(loss):
            return self._diverge(step, "non-finite eval loss")
        if loss > self.bound and self.ema > self.bound:
            return self._diverge(step, f"eval loss {loss:.4g} and smoothed train loss "
                                       f"{self.ema:.4g} above {self.bound:.4g}")
        self.last_finite = loss
        return False

    @property
    def diverged(self) -> bool:
        return self.diverged_at is not None

    def _diverge(self, step: int, reason: str) -> bool:
        self.diverged_at, self.reason = step, reason
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "smoothing": self.smoothing, "patience": self.patience,
                "ema": self.ema, "above": self.above, "last_finite": self.last_finite,
                "diverged_at": self.diverged_at, "reason": self.reason}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.bound, self.smoothing = float(state["bound"]), float(state["smoothing"])
        self.patience, self.ema = int(state["patience"]), float(state["ema"])
        self.above, self.last_finite = int(state["above"]), float(state["last_finite"])
        self.diverged_at = None if state["diverged_at"] is None else int(state["diverged_at"])
        self.reason = state["reason"]
