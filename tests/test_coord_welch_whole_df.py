"""The coordinate check's t test rounds the Welch–Satterthwaite df down: a df that is a whole
number must stay that number, not lose one to floating-point rounding (8 seeds at 2 widths:
7 df, computed as 6.999999999999999 for some standard errors, tested at 6)."""

import numpy as np
import pandas as pd

from mutransfer.analysis.coordverdict import judge, slopes, welch_df
from mutransfer.analysis.tdist import t_upper

SE = 0.018883905235419673  # a seed spread whose v²/(v²/7) rounds to 6.999999999999999


def test_one_part_keeps_its_whole_degrees_of_freedom_exactly():
    df = welch_df(np.array([SE, 0.1, 0.05]), np.array([7.0, 7.0, 3.0]),
                  np.array([np.nan, np.nan, np.nan]), np.array([0.0, 0.0, 0.0]))
    assert df.tolist() == [7.0, 7.0, 3.0]


def test_two_parts_keep_their_fractional_welch_degrees_of_freedom():
    df = welch_df(np.array([0.1]), np.array([7.0]), np.array([0.1]), np.array([3.0]))
    assert df[0] == (2 * 0.01) ** 2 / (0.01**2 / 7 + 0.01**2 / 3)


def test_eight_seeds_at_two_widths_are_tested_at_seven_degrees_of_freedom():
    rng = np.random.default_rng(5)
    rows = []
    for q in range(40):
        for seed in range(8):
            slope = 0.3 + 0.05 * rng.standard_normal()
            for w in (32, 64):
                rows.append({"parameterization": "mup", "width": w, "seed": seed, "step": 0,
                             "layer": -1, "quantity": f"q{q}", "rms": (w / 32) ** slope,
                             "drms": 0.0})
    judged = judge(slopes(pd.DataFrame(rows)), 0.2, 0.05)
    assert (judged["df"] == 7.0).all()
    want = [t_upper(e / s, 7) for e, s in zip(judged["excess"], judged["se"])]
    assert np.allclose(judged["p"], want, rtol=1e-12, atol=0)
