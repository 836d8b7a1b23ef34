"""The sequential transfer stage of `mutransfer check` spends its budget on more seeds where
more seeds can decide, and only there.

A round whose drift has no interval although every width has its optimum inside the grid
lacks only the seeds' spread: the verdict then advises "more seeds (check.seeds) give each
lr* an interval", so the next round must add them while the budget holds (before, the rounds
stopped after the first, the budget unspent, and advised what they could have done). Where
more seeds of this grid give nothing (an optimum on the grid's edge, no slope, a width with no
optimum) the rounds still stop at once; an interval inside or wholly outside ±tolerance stops
them as before."""

from __future__ import annotations

import math
import time

import pytest

import mutransfer.commands.check as check
from mutransfer.commands.check_plan import Budget
from mutransfer.commands.check_spec import CheckSpec

NAN = math.nan
SPEC = CheckSpec(name="c", check={"widths": [32, 64, 128], "seeds": [0, 1],
                                  "budget": {"seeds": 6}, "tolerance": 0.12})


def _rounds(tmp_path, monkeypatch, drifts: list[dict]) -> tuple[list[list[int]], check.Rounds]:
    """Run the stage with round k's drift row `drifts[k]`; the seeds of each round run."""
    calls: list[list[int]] = []

    def fake_round(spec, out, seeds, deadline, num_cpus):
        calls.append(list(seeds))
        return drifts[len(calls) - 1], False, (10 * len(calls), 1.0)

    monkeypatch.setattr(check, "_transfer_round", fake_round)
    r = check._transfer_stage(SPEC, tmp_path, 60, Budget(), None, time.time(), 0)
    return calls, r


def test_no_interval_with_every_optimum_inside_the_grid_runs_the_next_seed_set(
        tmp_path, monkeypatch):
    lacking = {"slope": 0.02, "ci_low": NAN, "ci_high": NAN, "n_edge": 0, "n_widths": 3,
               "note": "no interval: lr* at width 32 has none"}
    inside = {"slope": 0.02, "ci_low": -0.05, "ci_high": 0.09, "n_edge": 0, "n_widths": 3}
    calls, r = _rounds(tmp_path, monkeypatch, [lacking, inside])
    assert calls == [[0, 1], [0, 1, 2, 3]] and r.rounds == 2 and r.drift == inside
    assert not r.stopped


@pytest.mark.parametrize("drift", [
    {"slope": 0.3, "ci_low": NAN, "ci_high": NAN, "n_edge": 1, "n_widths": 3},  # grid's edge
    {"slope": NAN, "ci_low": NAN, "ci_high": NAN, "n_edge": 0, "n_widths": 1},  # no slope
    {"slope": 0.1, "ci_low": NAN, "ci_high": NAN, "n_edge": 0, "n_widths": 2},  # a width lacks
    {"slope": 0.02, "ci_low": -0.12, "ci_high": 0.12, "n_edge": 0, "n_widths": 3},  # PASS
    {"slope": 0.5, "ci_low": 0.13, "ci_high": 0.9, "n_edge": 0, "n_widths": 3},  # FAIL
])
def test_rounds_stop_where_more_seeds_of_this_grid_cannot_decide(tmp_path, monkeypatch,
                                                                  drift):
    calls, r = _rounds(tmp_path, monkeypatch, [drift, drift, drift])
    assert calls == [[0, 1]] and r.rounds == 1 and not r.stopped


def test_an_interval_across_the_bound_runs_every_round_the_budget_holds(tmp_path,
                                                                        monkeypatch):
    across = {"slope": 0.1, "ci_low": 0.12, "ci_high": 0.3, "n_edge": 0, "n_widths": 3}
    calls, r = _rounds(tmp_path, monkeypatch, [across] * 3)
    assert len(calls) == 3 and r.stopped == "6 seeds"
