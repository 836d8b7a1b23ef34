"""What an INCONCLUSIVE `mutransfer check` without a drift interval advises: what would give
one. More seeds only when each width has its optimum inside the LR grid and lacks only the
seeds' spread; a grid on which no LR trained at two widths, or whose edge holds an optimum,
needs another check.lr, which more seeds of the same grid never give."""

from __future__ import annotations

import math

import pandas as pd

from mutransfer.analysis.checkverdict import decide

NAN = math.nan
COORD = pd.DataFrame({"layer": [-1], "quantity": ["tok"], "order": [0]})
FLAT = pd.DataFrame([{"parameterization": "mup", "layer": -1, "quantity": "tok", "step": s,
                      "kind": "h", "slope": 0.0, "se": 0.02, "status": "ok"} for s in (0, 1)])


def _advice(drift: dict) -> str:
    v = decide(FLAT, COORD, {}, drift, 0.12, seeds=2)
    assert v.verdict == "INCONCLUSIVE" and "no interval" in v.reason
    return " | ".join(v.advice)


def test_no_optimum_at_two_widths_asks_for_another_lr_grid_not_more_seeds():
    # analysis/drift.py's row when every LR of check.lr diverged at every width
    advice = _advice({"slope": NAN, "ci_low": NAN, "ci_high": NAN, "n_edge": 0,
                      "note": "needs at least two widths; an optimum (some LR trained) at 0 "
                              "of 2"})
    assert "check.lr" in advice and "seeds" not in advice, advice


def test_optima_on_the_grid_edge_ask_to_widen_it_not_for_more_seeds():
    advice = _advice({"slope": 0.4, "ci_low": NAN, "ci_high": NAN, "n_edge": 2,
                      "note": "2 of 2 optima on the grid edge: slope is not even a bound"})
    assert "widen check.lr" in advice and "seeds" not in advice, advice


def test_an_optimum_without_the_seeds_spread_asks_for_more_seeds():
    advice = _advice({"slope": 0.1, "ci_low": NAN, "ci_high": NAN, "n_edge": 0,
                      "note": "no interval: lr* at width 32 has none"})
    assert "more seeds" in advice and "check.lr" not in advice, advice
