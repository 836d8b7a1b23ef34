"""A log2 LR range runs 2^lo and 2^hi themselves, as the file writes them, whatever the last
bits of `lo + n/k` are.

Found by probing: `{log2: [-8.3, -6.3]}` ran 2^-6.300000000000001 (0.012691443693066174) as
its high end, not 2^-6.3 (0.012691443693066181): another float, so another trial id than the
same LR at the low end of `{log2: [-6.3, -4.3]}`. Ranges with whole or dyadic ends (every
shipped sweep's) already gave 2^hi exactly; their LRs, and trial ids, stay as they were.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.spec import SweepSpec

BASE: dict[str, Any] = {
    "name": "lr-ends",
    "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
    "train": {"steps": 10, "batch_size": 2, "seq_len": 16, "eval_every": 5},
}


def lrs(lr_axis: dict[str, Any]) -> list[float]:
    plan = build_plan(SweepSpec.model_validate({**BASE, "axes": {"lr": lr_axis}}))
    return sorted(c.columns["lr"] for c in plan.cells)


@pytest.mark.parametrize("lo, hi, k", [(-8.3, -6.3, 1), (-0.3, 1.7, 1), (-7.1, -6.1, 10),
                                       (-10.1, -4.1, 3)])
def test_a_range_runs_both_of_its_ends_exactly(lo, hi, k):
    grid = lrs({"log2": [lo, hi], "per_octave": k})
    assert len(grid) == round((hi - lo) * k) + 1
    assert grid[0] == 2.0 ** lo
    assert grid[-1] == 2.0 ** hi


def test_a_ranges_high_end_is_the_same_cell_as_the_next_ranges_low_end():
    def ids(lr_axis: dict[str, Any]) -> dict[float, str]:
        plan = build_plan(SweepSpec.model_validate({**BASE, "axes": {"lr": lr_axis}}))
        return {c.columns["lr"]: c.trial_id for c in plan.cells}

    below, above = ids({"log2": [-8.3, -6.3]}), ids({"log2": [-6.3, -4.3]})
    assert below[max(below)] == above[min(above)]


@pytest.mark.parametrize("lo, hi, k", [(-10, -6, 1), (-10, -6, 3), (-12, -6, 3),
                                       (-9.5, -7.5, 2), (-13, -5, 1)])
def test_ranges_with_dyadic_ends_keep_the_lrs_they_always_ran(lo, hi, k):
    """Their trial ids stay: every point is still 2^(lo + i/k), the top one included."""
    n = round((hi - lo) * k)
    assert lrs({"log2": [lo, hi], "per_octave": k}) == [2.0 ** (lo + i / k)
                                                         for i in range(n + 1)]


def test_whole_octaves_of_a_range_are_exact_powers_of_two():
    grid = lrs({"log2": [-10, -3], "per_octave": 3})
    octaves = [lr for lr in grid if math.log2(lr).is_integer()]
    assert octaves == [2.0 ** e for e in range(-10, -2)]
    assert grid[-1] == 0.125
