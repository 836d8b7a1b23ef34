"""What a searcher minimizes: the name of the metric Tune gets back from each trial, and its
value for a trials-table row."""

from __future__ import annotations

import math
from typing import Any

# what Tune gets back from each trial (and the Optuna searcher minimizes `objective`)
OBJECTIVE = "objective"


def objective(row: dict[str, Any]) -> float:
    """What adaptive search minimizes: the final eval loss; a diverged trial (no final loss)
    scores as if it had learned nothing (its initial loss), so the searcher steers away."""
    final, initial = row.get("final_eval_loss"), row.get("initial_loss")
    if not row.get("diverged") and finite(final):
        return float(final)
    return float(initial) if finite(initial) else 1e6


def finite(value: Any) -> bool:
    """A number (not None, not text) that is finite."""
    return isinstance(value, (int, float)) and math.isfinite(value)
