"""How many trials a sweep file asks for, counted from its axes without building a cell, and
the limit above which a sweep is refused unless the user raises it (`--max-cells`).

A grid's cells are validated one by one before anything runs (mutransfer/sweep/plan/cells.py); for
a mistyped grid of a million cells that alone takes minutes and gigabytes, and Ray then holds
every cell. The count is an upper bound: cells that an axis does not change are run once.
"""

from __future__ import annotations

import math

from mutransfer.errors import UserError
from mutransfer.sweep.plan.axes import Axis, parameterizations, parse_axes
from mutransfer.sweep.plan.spec import SweepSpec

MAX_CELLS = 10_000  # the default limit: far above the shipped sweeps (the largest has 555)


def count_trials(spec: SweepSpec) -> int:
    """Grid and transfer search (a subset of the grid): the number of cells; adaptive search:
    groups x trials per group."""
    axes = parse_axes(spec.axes, parameterizations(spec))
    plain = [a for a in axes if a.lr is None]
    lr_axis = next((a for a in axes if a.lr is not None), None)
    combos = math.prod(len(a.values) for a in plain)
    if spec.search.adaptive:
        return combos * spec.search.trials_per_width
    if lr_axis is None:
        return combos
    return _times_lrs(combos, plain, lr_axis, parameterizations(spec))


def _times_lrs(combos: int, plain: list[Axis], lr_axis: Axis, default: list[str]) -> int:
    """combos x the LRs of each combination's parameterization."""
    by_param = next((a for a in plain if a.path == "param.name"), None)
    if by_param is None:
        if any(a.path == "param" for a in plain):  # whole param sections: bound from above
            return combos * max(len(c.values) for c in (lr_axis.lr or {}).values())
        return combos * len(lr_axis.lr_for(default[0]).values)
    rest = combos // len(by_param.values)
    return rest * sum(len(lr_axis.lr_for(str(p)).values) for p in by_param.values)


def check_size(spec: SweepSpec, source: str, max_cells: int | None) -> int:
    """The trial count, or a UserError when it is above `max_cells` (default MAX_CELLS)."""
    limit = MAX_CELLS if max_cells is None else max_cells
    try:
        n = count_trials(spec)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    if n > limit:
        unit = "trials" if spec.search.adaptive else "cells"
        raise UserError(f"{source}: {n:,} {unit}, more than the limit of {limit:,}; check the "
                        f"axes, or raise the limit with --max-cells {n} (from Python: "
                        f"max_cells={n})")
    return n
