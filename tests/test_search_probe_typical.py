"""The typical count a transfer search announces is what it runs at a well-predicted width.

`mutransfer validate` and `--dry-run` say a transfer search runs "about N when each optimum is
inside the grid (about K LRs a width ...)". K must be what the search's own settling rule runs
at a width whose lr* was predicted exactly, or a researcher budgeting by it is short.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.search.families import families_of
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch, settle_count

WIDTHS = [32, 64, 128, 256]


def bowl_cells(log2_lrs: np.ndarray) -> list[Cell]:
    return [Cell(f"mup-{w}-{x:.4f}", {"width": w},
                 {"width": w, "parameterization": "mup", "lr": float(2.0 ** x), "seed": 0})
            for w in WIDTHS for x in log2_lrs]


@pytest.mark.parametrize("step,window", [(0.5, 3), (1 / 3, 3), (0.25, 3), (0.5, 5), (1.0, 3)])
def test_the_typical_lrs_a_width_are_those_a_well_predicted_width_runs(step, window):
    """lr* fixed at the grid's middle LR at every width (muP-like), no noise: every wider
    width is predicted exactly, and runs exactly `settle_count` LRs."""
    x = np.arange(-14.0, -2.0 + 1e-9, step)
    opt = float(x[len(x) // 2])
    grid = bowl_cells(x)
    by_id = {c.trial_id: c for c in grid}
    options = Search(kind="transfer", window=window)
    search = TransferSearch(families_of(grid), options)
    while (tid := search.next_trial()) is not None:
        lr = math.log2(by_id[tid].columns["lr"])
        search.finish(tid, Outcome(False, 3.0 + 0.05 * (lr - opt) ** 2))
    plans = search.plans()[0]
    assert all(p.settled and p.log2_opt == pytest.approx(opt, abs=1e-6) for p in plans)
    wider = [int(p.stats.done.sum()) for p in plans[1:]]
    assert wider == [settle_count(search.families[0], options)] * (len(WIDTHS) - 1)
