"""When a trial has diverged: the rule, fed one loss at a time by the training loop.

The bound is initial loss + `threshold` (the initial eval loss, before any step). A trial has
diverged when
  1. a train or eval loss is not finite: training stops at once; or
  2. at the end of training it did not recover (`finish`): its final eval loss is above the
     bound, or its smoothed train loss went above the bound at some point and the final eval
     loss is not below the initial loss (a run that blew up and collapsed to near-uniform
     predictions has not trained, even if that level is under the bound).
A loss that is high but finite does not stop training under the default rule ("final"): runs
that spike in warm-up and recover are common at high LRs, and the old early stop (a smoothed
loss above the bound for `patience` steps, or an eval loss above it) stopped runs that went on
to train to good losses (docs/results-format.md, "Divergence"). Rule "patience" keeps that early
stop for sweeps that would rather save the compute: a smoothed train loss above the bound for
`patience` consecutive steps stops the trial as diverged. No rule stops on an eval loss alone.

Either way the monitor records the spike of every trial: `max_excursion`, the largest rise of
the smoothed train loss (an EMA started at the initial loss) over the initial loss, in nats (0
when it never rose above it), and `steps_above`, the number of steps (not necessarily
consecutive) the smoothed loss spent above the bound. A complete trial with `steps_above` > 0
spiked and recovered: "unstable but trained".

The state is plain numbers (`state_dict`), so a checkpoint carries it and a resumed trial
judges exactly as an uninterrupted one.
"""

from __future__ import annotations

import math
from typing import Any

RULES = ("final", "patience")


class DivergenceMonitor:
    """Feed it every train loss (`train_loss`) and every eval loss (`eval_loss`); each returns
    True when training must stop now (the trial has diverged, `diverged_at` holds the step).
    Call `finish` with the final eval loss when training ran to its end."""

    def __init__(self, initial_loss: float, threshold: float, smoothing: float, patience: int,
                 rule: str = "final"):
        if rule not in RULES:
            raise ValueError(f"divergence rule {rule!r}, expected one of {RULES}")
        self.initial = initial_loss
        self.bound = initial_loss + threshold
        self.smoothing, self.patience, self.rule = smoothing, patience, rule
        self.ema = initial_loss
        self.above = 0  # consecutive steps with the EMA above the bound
        self.steps_above = 0  # all steps with the EMA above the bound
        self.max_excursion = 0.0  # largest EMA - initial loss seen (nats)
        self.last_finite = initial_loss  # last finite loss before the step that diverged
        self.diverged_at: int | None = None
        self.stopped = False  # the rule stopped training (else it was judged at the end)
        self.reason: str | None = None

    def train_loss(self, step: int, loss: float) -> bool:
        if not math.isfinite(loss):
            return self._stop(step, "non-finite train loss")
        self.ema = self.smoothing * self.ema + (1 - self.smoothing) * loss
        self.max_excursion = max(self.max_excursion, self.ema - self.initial)
        if self.ema > self.bound:
            self.above += 1
            self.steps_above += 1
        else:
            self.above = 0
        if self.rule == "patience" and self.above >= self.patience:
            return self._stop(step, f"smoothed train loss above {self.bound:.4g} for "
                                    f"{self.above} steps")
        self.last_finite = loss
        return False

    def eval_loss(self, step: int, loss: float) -> bool:
        if not math.isfinite(loss):
            return self._stop(step, "non-finite eval loss")
        self.last_finite = loss
        return False

    def finish(self, step: int, final_eval_loss: float) -> bool:
        """Judge a trial that trained to its last step; True when it did not recover."""
        if self.diverged:
            return True
        if final_eval_loss > self.bound:
            return self._judge(step, f"final eval loss {final_eval_loss:.4g} above "
                                     f"{self.bound:.4g}")
        if self.steps_above and final_eval_loss >= self.initial:
            return self._judge(step, f"smoothed train loss was above {self.bound:.4g} for "
                                     f"{self.steps_above} steps and the final eval loss "
                                     f"{final_eval_loss:.4g} is not below the initial "
                                     f"{self.initial:.4g}: did not recover")
        return False

    @property
    def diverged(self) -> bool:
        return self.diverged_at is not None

    def _stop(self, step: int, reason: str) -> bool:
        self.diverged_at, self.reason, self.stopped = step, reason, True
        return True

    def _judge(self, step: int, reason: str) -> bool:
        self.diverged_at, self.reason = step, reason
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"initial": self.initial, "bound": self.bound, "smoothing": self.smoothing,
                "patience": self.patience, "rule": self.rule, "ema": self.ema,
                "above": self.above, "steps_above": self.steps_above,
                "max_excursion": self.max_excursion, "last_finite": self.last_finite,
                "diverged_at": self.diverged_at, "stopped": self.stopped, "reason": self.reason}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.initial, self.bound = float(state["initial"]), float(state["bound"])
        self.smoothing, self.rule = float(state["smoothing"]), str(state["rule"])
        self.patience, self.ema = int(state["patience"]), float(state["ema"])
        self.above, self.steps_above = int(state["above"]), int(state["steps_above"])
        self.max_excursion = float(state["max_excursion"])
        self.last_finite = float(state["last_finite"])
        self.diverged_at = None if state["diverged_at"] is None else int(state["diverged_at"])
        self.stopped, self.reason = bool(state["stopped"]), state["reason"]
