"""The transfer regret where search.stop stopped the transferred LR early at a wide width.

Under SP lr* halves per doubling of width, so the smallest width's lr* lies octaves from a
wide width's best LR: exactly the LRs `search.stop` stops early there (at least
`protect_octaves` from the best, and behind it). Such an LR ran and fell behind the best; the
regret table must say so. It called it `not run`, used the next LR out instead and, where that
one diverged, reported the transfer as `diverged` (regret inf): a result about an LR nobody
transferred, and the wrong one (the transferred LR trains at that width).
"""

import numpy as np
import pytest

from mutransfer.analysis import analyze
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

BEST_LOG2 = {64: -6, 128: -7, 256: -8, 512: -9}  # planted lr* (SP: -1 octave per doubling)


@pytest.fixture(scope="module")
def sp_stopped(tmp_path_factory):
    """SP, widths 64..512, half-octave LRs, 3 seeds; each LR diverges above 2^-3 x 64/width.
    At widths 256 and 512 the LRs 2.5 or more octaves above the best that trained are stopped
    early, as search.stop (protect_octaves 2.5) stops them: at 512 those are 2^-6.5 and 2^-6,
    the smallest width's lr* included; 2^-5.5 diverges there."""
    sp = Planted("sp", 2**-6, -1.0, stable_base=2**-3, stable_exponent=-1.0)
    t = synthetic_tables([sp], [64, 128, 256, 512],
                         [2.0**k for k in np.arange(-12, 0.01, 0.5)], [0, 1, 2])
    tr = t.trials
    above = np.log2(tr.lr) - tr.width.map(BEST_LOG2)
    tr.loc[(tr.width >= 256) & ~tr.diverged & (above >= 2.5), "status"] = "stopped"
    return analyze(write_results(tmp_path_factory.mktemp("store"), t))


def test_a_transferred_lr_stopped_early_is_reported_as_stopped_not_diverged(sp_stopped):
    row = sp_stopped.regret.set_index("width").loc[512]
    lr0 = float(sp_stopped.lr_opt.set_index("width").loc[64, "lr_opt"])
    assert abs(np.log2(lr0) + 6) < 0.1  # the planted optimum at the smallest width
    assert row.transfer == "stopped early" and row.status_used == "stopped"
    assert row.lr_used == 2**-6 and row.nearest_run  # it ran: the LR nearest lr*, not 2^-5.5
    assert row.lr_gap_log2 == pytest.approx(abs(np.log2(lr0) + 6))
    assert np.isnan(row.regret) and np.isnan(row.loss_used)  # no final loss: no regret
    assert "not run" not in row.note and "diverged" not in row.note
    assert "search.stop stopped 2^-6 early" in row.note


def test_widths_where_the_transferred_lr_trained_keep_their_regret(sp_stopped):
    """At 256 the stopped LRs (2^-5.5, 2^-5) are not the one nearest lr*: regret as before,
    the loss at 2^-6 minus the best (planted: 0.04 x 2^2 octaves = 0.16 nats)."""
    r = sp_stopped.regret.set_index("width")
    assert (r.loc[[64, 128, 256], "transfer"] == "trained").all()
    assert r.loc[256, "lr_used"] == 2**-6 and r.loc[256, "regret"] == pytest.approx(0.16,
                                                                                    abs=0.02)
