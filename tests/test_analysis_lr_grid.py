"""One grid value, two floats: LRs a last digit apart are one LR of the grid (groups.py).

A log2 range `{log2: [lo, hi], per_octave: 3}` is expanded as 2.0 ** (lo + i / 3), so the
same grid point computed from two values of lo (a grid extended downward and run again, or
a wider width run from another sweep file into the same store) can differ in its last digit.
The analysis took such a pair for two LRs, each "not run" at the widths that ran the other:
every shared LR listed as not run, the regret's "nearest LR not run", and the stability
brackets and their slope's interval computed over a grid with holes.
"""

import numpy as np
import pandas as pd

from mutransfer.analysis import analyze
from mutransfer.results.store import Tables
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results


def _grid(lo: int, hi: int, per_octave: int = 3) -> list[float]:
    """As mutransfer/sweep/plan/axes.py expands a log2 range."""
    n = round((hi - lo) * per_octave)
    return [2.0 ** (lo + i / per_octave) for i in range(n + 1)]


def test_a_grid_point_computed_from_two_starting_octaves_is_one_lr(tmp_path):
    old, new = _grid(-12, -4), _grid(-11, -3)
    shared = sorted(set(np.round(np.log2(old), 6)) & set(np.round(np.log2(new), 6)))
    assert len(set(old) & set(new)) < len(shared)  # the premise: some differ in a last digit
    fam = [Planted("sp", 2**-7, -1.0, stable_base=2**-4, stable_exponent=-0.5)]
    a = synthetic_tables(fam, [64, 128], old, [0, 1])
    b = synthetic_tables(fam, [256], new, [0, 1], rng_seed=1)
    tables = Tables(pd.concat([a.trials, b.trials], ignore_index=True),
                    pd.concat([a.steps, b.steps], ignore_index=True))
    r = analyze(write_results(tmp_path, tables))
    lr_opt = r.lr_opt.set_index("width")
    # only the grid's own ends are missing: 2^-12 .. 2^-11.33 at 256, 2^-3.67 .. 2^-3 below
    assert lr_opt["n_lrs_not_run"].to_dict() == {64: 3, 128: 3, 256: 3}
    # the cells table lists every LR of the family at each width: 28, not run ones included
    assert r.cells.groupby("width")["lr"].nunique().to_dict() == {64: 28, 128: 28, 256: 28}
    assert r.regret["nearest_run"].all()
