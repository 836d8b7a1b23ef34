"""Intervals of lr* on stores an outside user produces mid-sweep or by hand (a probe,
2026-11-30): every interval the analysis gives contains its estimate and says as much as the
data behind it, and where the data cannot give one it gives none, with a note saying why.
"""

from __future__ import annotations

import numpy as np

from mutransfer.analysis import analyze
from tests.sweeps import MUP, SP
from tests.synthetic_sweeps import synthetic_tables, write_results

HALF_OCTAVE = [2.0**e for e in np.arange(-12, -3.9, 0.5)]


def test_a_width_with_one_seed_among_two_seed_widths_has_no_interval_not_one_of_many_octaves(
        tmp_path):
    """A sweep still running (or a seed that failed at the widest width) leaves one seed at a
    width whose family has two elsewhere. The family's noise is the seeds' scatter, a ratio to
    each width's design read with its seeds' scatter at each LR; the one-seed width has no
    scatter, so its design was read per unit loss variance and the ratio made its interval
    10^3-10^4 times too wide in variance: on the quickstart store [1.87e-04, 2.28e+00] around
    2.06e-02 (mup_ssm) and [3.05e-08, 2.48e+03] around 8.69e-03 (sp), and the drift's
    interval [-9.7, +8.4]."""
    t = synthetic_tables([SP, MUP], [64, 128, 256], HALF_OCTAVE, [0, 1], noise=0.01)
    trials = t.trials
    t.trials = trials[~((trials["width"] == 256) & (trials["seed"] == 1))]
    a = analyze(write_results(tmp_path / "store", t))
    lr = a.lr_opt.set_index(["parameterization", "width"])
    for p in ("sp", "mup"):
        one = lr.loc[(p, 256)]
        assert one["n_seeds"] == 1
        assert np.isnan(one["ci_low"]) and np.isnan(one["ci_high"])
        assert "one seed" in one["note"]
        for w in (64, 128):  # the widths with seeds keep theirs, within a few octaves
            row = lr.loc[(p, w)]
            assert row["ci_low"] <= row["lr_opt"] <= row["ci_high"]
            assert np.log2(row["ci_high"] / row["ci_low"]) < 3
    drift = a.drift.set_index("parameterization")
    assert drift["ci_low"].isna().all()
    assert drift["note"].str.contains("256").all()
    # the noise pooled from the two-seed widths is what it is without the one-seed width
    t.trials = trials[trials["width"] < 256]
    clean = analyze(write_results(tmp_path / "clean", t))
    assert {g.key[0]: g.noise.var for g in clean.optima} == \
        {g.key[0]: g.noise.var for g in a.optima}
