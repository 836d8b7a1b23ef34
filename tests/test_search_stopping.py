"""The early-stopping rule (mutransfer/sweep/search/stopping.py) on small hand-made curves."""

from __future__ import annotations

import numpy as np

from mutransfer.sweep.search.stopping import StopOptions, crossing_allowance, should_stop


def test_the_allowance_is_the_largest_gap_that_closed_by_the_end():
    # LR 2 leads at point 0 (short-horizon) and loses at the end: LR 0's gap shrank by 0.3
    y = np.array([[5.0, 4.0, 3.0],
                  [4.9, 3.95, 3.05],
                  [4.7, 3.9, 3.2]])
    a = crossing_allowance([y])
    assert np.allclose(a, [0.3, 0.1, 0.0])
    # a second curve with a larger shrink at point 1 raises that point only
    y2 = y.copy()
    y2[0, 1] = 4.4
    assert np.allclose(crossing_allowance([y, y2]), [0.3, 0.5, 0.0])
    assert np.isnan(crossing_allowance([y[:1]])).all()  # one LR informs nothing


def test_never_the_best_never_near_it_and_only_past_the_allowance():
    x = np.array([-10.0, -8.0, -6.0, -4.0])
    y = np.array([4.0, 3.5, 3.0, 3.2])
    opts = StopOptions(protect_octaves=2.5, safety=1.0)
    assert not should_stop(-6.0, 3.0, x, y, 0.1, opts)       # the best
    assert not should_stop(-4.0, 3.2, x, y, 0.1, opts)       # 2 octaves away: protected
    assert should_stop(-10.0, 4.0, x, y, 0.1, opts)          # 4 octaves, gap 1.0 > 0.1
    assert not should_stop(-10.0, 4.0, x, y, 1.5, opts)      # gap within the allowance
    assert not should_stop(-10.0, 4.0, x, y, np.nan, opts)   # nothing known: run on
    assert should_stop(-8.0, 3.5, x, y, 0.1, StopOptions(protect_octaves=1.5))
    assert not should_stop(-8.0, 3.5, x, y, 0.1, StopOptions(protect_octaves=2.5))
