"""The transfer search as a state machine, on planted loss curves (no Ray, no training).

Each planted family has a bowl-shaped final loss in log2 LR around lr*(w) = lr*_base (w/w0)^e
with a little seed noise, and every LR above its stable(w) diverges. A tiny simulator runs the
cells the search hands out, a few at a time, finishing the oldest first.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import numpy as np
import pytest

from mutransfer.analysis_defaults import FIT_WINDOW
from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.run.driver import prepare
from mutransfer.sweep.search.families import families_of
from mutransfer.sweep.search.transfer.decisions import (
    SETTLE_OCTAVES,
    Outcome,
    Prediction,
    TransferSearch,
    log2_optimum,
    lr_stats,
    predict,
    settle_radius,
    window_around,
)
from tests.sweeps import write_sweep

WIDTHS = [32, 64, 128, 256, 512]
LOG2_GRID = np.arange(-14.0, -1.9, 0.5)  # 25 LRs, half-octave steps
SEEDS = [0, 1]


def cells(params=("sp", "mup"), widths=WIDTHS, log2_grid=LOG2_GRID, seeds=SEEDS) -> list[Cell]:
    out = []
    for p in params:
        for w in widths:
            for x in log2_grid:
                for s in seeds:
                    lr = float(2.0 ** x)
                    out.append(Cell(f"{p}-{w}-{x}-{s}", {"width": w},
                                    {"width": w, "parameterization": p, "lr": lr, "seed": s,
                                     "optimizer": "adam"}))
    return out


class Planted:
    """lr*(w) and stable(w) per parameterization; a cell's outcome from its id."""

    def __init__(self, opt=None, stable=None, noise=0.01, curvature=0.05):
        # sp: lr* halves per doubling, mup: stays put
        self.opt = opt or {"sp": lambda w: -6.0 - math.log2(w / 32),
                           "mup": lambda w: -7.0}
        self.stable = stable or {"sp": lambda w: -3.5 - math.log2(w / 32),
                                 "mup": lambda w: -4.0}
        self.noise, self.curvature = noise, curvature

    def __call__(self, cell: Cell) -> Outcome:
        c = cell.columns
        x, w = math.log2(c["lr"]), c["width"]
        if x > self.stable[c["parameterization"]](w) + 1e-9:
            return Outcome(True)
        jitter = (zlib.crc32(cell.trial_id.encode()) % 1000 / 1000 - 0.5) * self.noise
        return Outcome(False, 3.0 - 0.05 * math.log2(w) +
                       self.curvature * (x - self.opt[c["parameterization"]](w)) ** 2 + jitter)


def simulate(search: TransferSearch, truth: Planted, by_id: dict[str, Cell],
             at_once: int = 4) -> list[str]:
    """Run the search to its end, `at_once` cells at a time; the ids run, in order."""
    running: list[str] = []
    ran: list[str] = []
    for _ in range(100_000):
        while len(running) < at_once and (tid := search.next_trial()) is not None:
            running.append(tid)
        if not running:
            assert search.idle
            return ran
        tid = running.pop(0)
        ran.append(tid)
        search.finish(tid, truth(by_id[tid]))
    raise AssertionError("the search did not end")


def run_search(options: Search, truth: Planted | None = None, grid=None, results=None,
               at_once: int = 4) -> tuple[TransferSearch, list[str], dict[str, Cell]]:
    grid = grid if grid is not None else cells()
    by_id = {c.trial_id: c for c in grid}
    search = TransferSearch(families_of(grid), options, results)
    ran = simulate(search, truth or Planted(), by_id, at_once)
    return search, ran, by_id


def grid_optima(truth: Planted, grid: list[Cell]) -> dict[tuple[str, int], float]:
    """lr* (log2) per (parameterization, width) from every cell, as the analysis fits it."""
    results = {c.trial_id: truth(c) for c in grid}
    out = {}
    for fam in families_of(grid):
        for w in fam.widths:
            out[(fam.label, w)] = log2_optimum(lr_stats(fam, w, results), fam.log2_lrs)
    return out


def search_optima(search: TransferSearch) -> dict[tuple[str, int], float]:
    return {(search.families[i].label, p.width): p.log2_opt
            for i, plans in search.plans().items() for p in plans}


def ran_at(ran, by_id, param, width) -> set[float]:
    return {math.log2(by_id[t].columns["lr"]) for t in ran
            if by_id[t].columns["parameterization"] == param and by_id[t].width == width}


def test_the_smallest_width_walks_to_its_optimum_and_each_wider_one_runs_the_fits_support():
    truth = Planted()
    search, ran, by_id = run_search(Search(kind="transfer"), truth)
    assert search.complete()
    for p in ("sp", "mup"):
        first = sorted(ran_at(ran, by_id, p, 32))
        # from the grid's middle (-8) in octave steps towards the lower loss, then the support
        assert -8.0 in first and len(first) < len(LOG2_GRID) // 2, (p, first)
        opt = truth.opt[p](32)
        assert {opt - 1.0, opt - 0.5, opt, opt + 0.5, opt + 1.0} <= set(first)
        for w in WIDTHS[1:]:
            lrs = sorted(ran_at(ran, by_id, p, w))
            # every grid LR within the settle radius (1.22 octaves) of the optimum, and at most
            # two more (sp's window at width 64 is centred on width 32's lr*: one LR too high;
            # the fitted optimum of noisy points is a little off the planted one)
            opt = truth.opt[p](w)
            assert {opt - 1.0, opt - 0.5, opt, opt + 0.5, opt + 1.0} <= set(lrs), (p, w, lrs)
            assert len(lrs) <= 7 and lrs == [lrs[0] + 0.5 * k for k in range(len(lrs))]
    assert len(ran) == len(set(ran))
    assert len(ran) <= 0.3 * len(by_id)  # 21%: the full grid was 20% at width 32 alone


def seeds_per_lr(ran, by_id) -> dict[tuple[str, int, float], set]:
    """The seeds run at each (parameterization, width, log2 LR)."""
    out: dict[tuple[str, int, float], set] = {}
    for t in ran:
        c = by_id[t].columns
        out.setdefault((c["parameterization"], c["width"], math.log2(c["lr"])), set()).add(
            c["seed"])
    return out


def test_every_seed_runs_where_it_could_move_lr_star_and_one_seed_elsewhere():
    # seed_tolerance (default 0.02 octave): beyond a width's first LRs one seed runs, and the
    # others only where their absence could move the fitted lr* by more than that; the LRs
    # left with one seed are read at the other seeds' level (seed-adjusted, as the analysis
    # reads them), so lr* stays within a few hundredths of the every-seed search's
    truth = Planted()
    every, ran_all, by_id = run_search(Search(kind="transfer", seed_tolerance=None), truth)
    search, ran, _ = run_search(Search(kind="transfer"), truth)
    assert Search(kind="transfer").seed_tolerance == 0.02
    assert all(s == set(SEEDS) for s in seeds_per_lr(ran_all, by_id).values())
    one_seed = [k for k, s in seeds_per_lr(ran, by_id).items() if len(s) == 1]
    assert len(one_seed) >= 10 and len(ran) < 0.8 * len(ran_all)
    # the smallest width (the walk, the cheapest) runs every seed wherever it runs
    assert not [k for k in one_seed if k[1] == WIDTHS[0]]
    full = grid_optima(truth, list(by_id.values()))
    for key, x in search_optima(search).items():
        assert x == pytest.approx(full[key], abs=0.02), key
    # a tighter tolerance runs more seeds
    tight, ran_tight, _ = run_search(Search(kind="transfer", seed_tolerance=0.001), truth)
    assert len(ran) < len(ran_tight) <= len(ran_all)


def test_an_lr_run_by_one_seed_is_read_at_the_other_seeds_level():
    # seed 1 runs 0.1 higher than seed 0 at every LR; where only seed 1 ran, the LR's loss is
    # its loss less that offset (analysis/cells.py), not 0.1 too high
    grid = cells(params=("mup",), widths=[32])
    fam = families_of(grid)[0]
    curve = {i: 3.0 + 0.05 * (x + 7.0) ** 2 for i, x in enumerate(LOG2_GRID)}
    results = {fam.ids[(32, i, s)]: Outcome(False, curve[i] + 0.1 * s)
               for i in range(8, 18) for s in SEEDS}
    lone = fam.ids[(32, 17, SEEDS[0])]
    results.pop(lone)
    stats = lr_stats(fam, 32, results)
    assert stats.n_ran[17] == 1 and stats.usable[17]
    assert stats.loss[17] == pytest.approx(curve[17] + 0.05, abs=1e-9)  # the two seeds' mean
    assert stats.loss[12] == pytest.approx(curve[12] + 0.05, abs=1e-9)


def test_the_settle_radius_is_a_number_of_octaves_and_coarse_grids_keep_two_lrs_a_side():
    assert settle_radius(Search(kind="transfer")) == SETTLE_OCTAVES
    assert settle_radius(Search(kind="transfer", settle_octaves=2.0)) == 2.0
    # a one-octave grid: the radius holds one LR a side, the fit wants two: it runs five
    coarse = cells(log2_grid=np.arange(-14.0, -1.9, 1.0), widths=[32, 64, 128])
    search, ran, by_id = run_search(Search(kind="transfer"), Planted(), grid=coarse)
    for w in (64, 128):
        lrs = sorted(ran_at(ran, by_id, "mup", w))
        assert [-9.0, -8.0, -7.0, -6.0, -5.0] == lrs, (w, lrs)


def test_with_every_seed_each_lr_star_is_the_grids_within_a_hundredth_of_an_octave():
    truth = Planted()
    search, _, by_id = run_search(Search(kind="transfer", seed_tolerance=None), truth)
    full = grid_optima(truth, list(by_id.values()))
    found = search_optima(search)
    for key, x in full.items():
        assert found[key] == pytest.approx(x, abs=0.01), key


def test_settled_by_the_widest_fit_window_lr_star_is_the_grids_exactly():
    truth = Planted()
    search, _, by_id = run_search(Search(kind="transfer", settle_octaves=FIT_WINDOW,
                                         seed_tolerance=None), truth)
    full = grid_optima(truth, list(by_id.values()))
    found = search_optima(search)
    for key, x in full.items():
        assert found[key] == pytest.approx(x, abs=1e-12), key


def test_an_optimum_at_the_grids_end_is_walked_to_at_the_smallest_width():
    # sp's optimum lies below the grid at every width: the walk goes down to the grid's first
    # LR, which stays the argmin (a bound, as the analysis reports it)
    truth = Planted(opt={"sp": lambda w: -16.0, "mup": lambda w: -7.0})
    search, ran, by_id = run_search(Search(kind="transfer"), truth, grid=cells(widths=[32, 64]))
    assert LOG2_GRID[0] in ran_at(ran, by_id, "sp", 32)
    assert search_optima(search)[("sp", 32)] == LOG2_GRID[0]
    assert search.complete()


def test_full_widths_runs_the_whole_grid_at_the_smallest_widths():
    search, ran, by_id = run_search(Search(kind="transfer", full_widths=1))
    assert len(ran_at(ran, by_id, "sp", 32)) == len(LOG2_GRID)
    assert len(ran_at(ran, by_id, "sp", 64)) < len(LOG2_GRID) // 2


def test_a_prediction_above_the_stable_range_steps_down_until_the_optimum_is_bracketed():
    # mup's lr* jumps down by 4 octaves at width 128 and its stability with it: the window
    # predicted from widths 32 and 64 diverges entirely
    truth = Planted(opt={"sp": lambda w: -6.0, "mup": lambda w: -7.0 if w < 128 else -11.0},
                    stable={"sp": lambda w: -3.5, "mup": lambda w: -4.0 if w < 128 else -9.0})
    search, ran, by_id = run_search(Search(kind="transfer"), truth, grid=cells(widths=[32, 64,
                                                                                         128]))
    lrs = sorted(ran_at(ran, by_id, "mup", 128))
    assert min(lrs) <= -11.5 and max(lrs) > -9.0  # walked down from the diverged window
    assert search_optima(search)[("mup", 128)] == pytest.approx(
        grid_optima(truth, list(by_id.values()))[("mup", 128)], abs=0.25)


def test_an_optimum_on_the_windows_edge_widens_it_one_grid_step_at_a_time():
    # the lr* of width 64 is 2 octaves below the lr* the smaller width predicts
    truth = Planted(opt={"sp": lambda w: -6.0 if w < 64 else -8.0, "mup": lambda w: -7.0})
    search, ran, by_id = run_search(Search(kind="transfer"), truth,
                                    grid=cells(widths=[32, 64]), at_once=1)
    lrs = sorted(ran_at(ran, by_id, "sp", 64))
    # the first window -6.5..-5.5, then down until the fit's support around -8 has run
    # (every LR within 1.22 octaves of it and of the fitted optimum, a little below -8)
    assert {-6.5, -6.0, -5.5} <= set(lrs) and min(lrs) in (-9.0, -9.5, -10.0)
    assert lrs == [lrs[0] + 0.5 * k for k in range(len(lrs))]
    assert search_optima(search)[("sp", 64)] == pytest.approx(-8.0, abs=0.05)


def test_a_diverged_lr_closes_the_high_side():
    # the best LR sits just below the stability edge: the diverged LR above it brackets it
    truth = Planted(opt={"sp": lambda w: -5.0, "mup": lambda w: -7.0},
                    stable={"sp": lambda w: -5.0, "mup": lambda w: -4.0})
    search, ran, by_id = run_search(Search(kind="transfer"), truth,
                                    grid=cells(widths=[32, 64]))
    lrs = sorted(ran_at(ran, by_id, "sp", 64))
    assert max(lrs) == -4.5  # the first diverged LR, and nothing above it
    assert -6.0 in lrs  # two below the best


def test_a_diverged_lr_below_the_best_is_skipped_not_a_bracket():
    # at width 64 the LR just below sp's optimum diverges (for no reason a bowl would give):
    # the low side still gets two trained LRs, as the analysis's fit on the grid would
    base = Planted()

    class Hole(Planted):
        def __call__(self, cell):
            c = cell.columns
            if c["parameterization"] == "sp" and c["width"] == 64 and \
                    math.log2(c["lr"]) == -7.5:
                return Outcome(True)
            return base(cell)

    truth = Hole()
    search, ran, by_id = run_search(Search(kind="transfer"), truth, grid=cells(widths=[32, 64]))
    lrs = sorted(ran_at(ran, by_id, "sp", 64))
    assert {-8.0, -7.5, -7.0} <= set(lrs), lrs
    # within 0.01 octave, not exact: the fit's window (2.5 octaves) weighs grid LRs beyond
    # the settle radius that the search leaves out
    assert search_optima(search)[("sp", 64)] == pytest.approx(
        grid_optima(truth, list(by_id.values()))[("sp", 64)], abs=0.01)


def test_probe_stability_runs_upward_to_the_first_diverged_lr_at_every_width():
    truth = Planted()
    search, ran, by_id = run_search(Search(kind="transfer", probe_stability=True), truth)
    for p in ("sp", "mup"):
        for w in WIDTHS[1:]:  # the smallest ran the whole grid
            lrs = ran_at(ran, by_id, p, w)
            first_bad = min(x for x in LOG2_GRID if x > truth.stable[p](w) + 1e-9)
            assert first_bad in lrs and max(lrs) == first_bad, (p, w)
            last_good = max(x for x in LOG2_GRID if x <= truth.stable[p](w) + 1e-9)
            assert last_good in lrs


def test_replaying_finished_results_runs_nothing_and_a_new_width_runs_only_its_window():
    truth = Planted()
    grid = cells(widths=WIDTHS[:4])
    done, ran, by_id = run_search(Search(kind="transfer"), truth, grid=grid)
    replay = TransferSearch(families_of(grid), done.options, done.results)
    assert replay.to_run() == [] and replay.idle and replay.complete()

    wider = cells(widths=WIDTHS)  # the same cells plus width 512
    again, ran2, by_id2 = run_search(Search(kind="transfer"), truth, grid=wider,
                                     results=done.results)
    assert ran2 and {by_id2[t].width for t in ran2} == {512}
    assert len(ran2) <= 2 * 11 * len(SEEDS)


def test_results_of_a_full_grid_leave_a_transfer_search_nothing_to_run():
    truth = Planted()
    grid = cells(widths=[32, 64, 128])
    search = TransferSearch(families_of(grid), Search(kind="transfer"),
                            {c.trial_id: truth(c) for c in grid})
    assert search.to_run() == [] and search.complete()


def test_a_failed_cell_stops_its_family_for_this_run_and_the_others_carry_on():
    grid = cells(widths=[32, 64])
    by_id = {c.trial_id: c for c in grid}
    search = TransferSearch(families_of(grid), Search(kind="transfer"))
    truth = Planted()
    failed = None
    while (tid := search.next_trial()) is not None or search.running:
        if tid is None:
            tid = next(iter(search.running))
        c = by_id[tid].columns
        if failed is None and c["parameterization"] == "mup" and c["width"] == 32:
            failed = tid
            search.fail(tid)
        else:
            search.finish(tid, truth(by_id[tid]))
    assert search.idle and not search.complete()
    ran = set(search.results)
    assert any(by_id[t].columns["parameterization"] == "sp" and by_id[t].width == 64 for t in ran)
    assert not any(by_id[t].columns["parameterization"] == "mup" and by_id[t].width == 64
                   for t in ran)


def test_a_diverged_trial_without_a_loss_counts_as_diverged():
    assert Outcome.of_row({"status": "diverged", "diverged": True,
                           "final_eval_loss": None}) == Outcome(True)
    out = Outcome.of_row({"status": "diverged", "diverged": True, "final_eval_loss": 2.0})
    assert out.diverged and math.isnan(out.loss)
    assert Outcome.of_row({"status": "complete", "diverged": False,
                           "final_eval_loss": 2.5}) == Outcome(False, 2.5)


def test_prediction_is_the_previous_optimum_then_the_drift_line_with_its_error():
    assert predict([], 64) is None
    one = predict([(32, -6.0)], 64)
    assert one.log2_lr == -6.0 and one.stderr == 0.0 and math.isnan(one.slope)
    two = predict([(32, -6.0), (64, -7.0)], 128)
    assert two.log2_lr == pytest.approx(-8.0) and two.slope == pytest.approx(-1.0)
    assert two.stderr == 0.0  # two points: no residual to estimate it from
    three = predict([(32, -6.0), (64, -7.2), (128, -7.8), (256, math.nan)], 256)
    assert three.widths == (32, 64, 128) and three.slope == pytest.approx(-0.9)
    assert three.stderr > 0.3  # the residuals are large: the window will be wider


def test_the_window_holds_the_nearest_lrs_and_everything_within_one_standard_error():
    grid = np.arange(-10.0, -3.9, 1.0)  # -10..-4
    assert window_around(grid, Prediction(-7.2, 0.0, -1.0, (32,)), 3) == (2, 4)
    assert window_around(grid, Prediction(-9.9, 0.0, -1.0, (32,)), 3) == (0, 2)
    assert window_around(grid, Prediction(-7.0, 2.1, -1.0, (32,)), 3) == (1, 5)


def test_bounds_and_expected_count():
    grid = cells(widths=[32, 64, 128])
    search = TransferSearch(families_of(grid), Search(kind="transfer"))
    least, typical, most = search.bounds()
    assert most == len(grid)
    assert least == 2 * len(SEEDS) * 3 * 3  # the walk's start, then a window of 3 a width
    # every LR within 1.22 octaves of the optimum: 5 of a half-octave grid at each width
    assert typical == 2 * len(SEEDS) * 3 * 7  # 7 LRs a width: test_search_probe_typical.py
    assert search.expected() == least  # nothing run yet: the walks' starts, first windows


def drive(searcher, truth: Planted, by_id: dict[str, Cell], fail: str | None = None) -> list:
    """Play Tune: ask for trials until FINISHED, completing the oldest when none is offered;
    the cell `fail` fails for good. The cells handed out, in order."""
    from ray.tune.search import Searcher

    handed = []
    for n in range(10_000):
        suggestion = searcher.suggest(f"tune-{n}")
        if suggestion == Searcher.FINISHED:
            return handed
        if suggestion is not None:
            handed.append(suggestion["trial_id"])
            continue
        tune_id = next(iter(searcher.owner))  # nothing offered: the oldest running ends
        cell = searcher.owner[tune_id]
        if cell == fail:
            searcher.on_trial_complete(tune_id, None, error=True)
            continue
        out = truth(by_id[cell])
        searcher.on_trial_complete(tune_id, {"trial_id": cell, "final_eval_loss": out.loss,
                                             "status": "diverged" if out.diverged else
                                             "complete"})
    raise AssertionError("the searcher never finished")


def test_the_tune_searcher_hands_out_cells_until_none_is_left_then_finishes():
    from mutransfer.sweep.search.transfer.searcher import TransferSearcher

    grid = cells(widths=[32, 64])
    by_id = {c.trial_id: c for c in grid}
    search = TransferSearch(families_of(grid), Search(kind="transfer"))
    handed = drive(TransferSearcher(search), Planted(), by_id)
    assert len(handed) == len(set(handed)) and search.complete() and not search.running

    # a cell that fails for good stops its family (a re-run retries it); the searcher ends
    search = TransferSearch(families_of(grid), Search(kind="transfer"))
    first_mup = next(t for t in search.to_run() if by_id[t].columns["parameterization"] == "mup")
    handed = drive(TransferSearcher(search), Planted(), by_id, fail=first_mup)
    assert search.failed == {first_mup} and not search.complete()
    assert {by_id[t].width for t in handed if by_id[t].columns["parameterization"] == "sp"} == \
        {32, 64}


def test_the_family_furthest_behind_goes_first_and_probes_wait_for_the_chains():
    grid = cells(widths=[32, 64, 128])
    by_id = {c.trial_id: c for c in grid}
    search = TransferSearch(families_of(grid), Search(kind="transfer", probe_stability=True))
    truth = Planted()

    def sp_cells() -> list[str]:
        return [t for t in search.to_run() if by_id[t].columns["parameterization"] == "sp"]

    # sp settles width 32 (and finishes the batch that settled it); mup has not started
    while not search.plans()[0][0].settled:
        search.finish(sp_cells()[0], truth(by_id[sp_cells()[0]]))
    for tid in sp_cells():
        search.finish(tid, truth(by_id[tid]))
    order = [(by_id[t].columns["parameterization"], by_id[t].width) for t in search.to_run()]
    assert order[0] == ("mup", 32)  # mup has three widths ahead, sp two
    assert ("sp", 64) in order
    # width 32's probes come after every cell a width waits for (width 64's window)
    probes = [by_id[t].width == 32 for t in sp_cells()]
    assert any(probes) and probes == sorted(probes)


class Asymmetric(Planted):
    """A bowl that rises `rise` times faster above the optimum than below it (as real curves
    do), every LR above stable(w) diverged."""

    def __init__(self, rise: float = 3.0, **kw):
        super().__init__(**kw)
        self.rise = rise

    def __call__(self, cell: Cell) -> Outcome:
        out = super().__call__(cell)
        if out.diverged:
            return out
        c = cell.columns
        t = math.log2(c["lr"]) - self.opt[c["parameterization"]](c["width"])
        return Outcome(False, out.loss + (self.rise - 1) * self.curvature * t * t * (t > 0))


@pytest.mark.parametrize("per_octave,offset", [(2, 0.0), (3, 0.1), (4, 0.3)])
@pytest.mark.parametrize("probe", [False, True])
def test_on_any_spacing_the_search_settles_by_the_fit_window_and_its_lr_is_the_grids(
        per_octave, offset, probe):
    # half-, third- and quarter-octave grids, offset from the optimum by a fraction of a step,
    # on an asymmetric bowl: every width's lr* is the grid's exactly (the fit sees the same
    # points), and the stability probe (LRs outside the window) changes no fit
    truth = Asymmetric(stable={"sp": lambda w: -2.5 - math.log2(w / 32), "mup": lambda w: -3.0})
    grid = cells(widths=[32, 64, 128], log2_grid=np.arange(-13.0, -2.0, 1 / per_octave) + offset)
    search, ran, by_id = run_search(Search(kind="transfer", probe_stability=probe,
                                           settle_octaves=FIT_WINDOW, seed_tolerance=None),
                                    truth, grid)
    full = grid_optima(truth, grid)
    found = search_optima(search)
    assert all(math.isfinite(x) for x in full.values())
    for key, x in full.items():
        assert found[key] == pytest.approx(x, abs=1e-9), key
    assert len(set(ran)) < len(grid)


def test_the_old_count_rule_missed_the_fit_window_on_a_third_octave_grid():
    # what a margin of 2 LRs would settle on (the old rule) is 2/3 of an octave either side:
    # a fit window of 2.5 octaves holds LRs it never ran; the octave rule runs every one
    truth = Asymmetric()
    grid = cells(params=("sp",), widths=[32, 64], log2_grid=np.arange(-13.0, -2.0, 1 / 3))
    search, ran, by_id = run_search(Search(kind="transfer", settle_octaves=FIT_WINDOW), truth,
                                    grid)
    lrs = sorted(ran_at(ran, by_id, "sp", 64))
    opt = search_optima(search)[("sp", 64)]
    assert max(lrs) - min(lrs) > 2 * (FIT_WINDOW - 1 / 3) - 1e-9
    window = [x for x in np.arange(-13.0, -2.0, 1 / 3) if abs(x - opt) < FIT_WINDOW]
    assert {round(x, 6) for x in window} <= {round(x, 6) for x in lrs}


def test_an_lr_where_one_seed_diverged_is_left_out_of_the_fit_as_the_analysis_does():
    # at sp width 64 one of the two seeds diverges at the LR just above the optimum: the
    # analysis fits without that LR (a partially diverged LR is never fitted), so the search's
    # lr* must too (counting it as trained by its other seed moved lr*)
    from mutransfer.analysis.fit import fit_optimum, grid_window

    base = Asymmetric(noise=0.0)

    class OneSeed(Asymmetric):
        def __call__(self, cell):
            c = cell.columns
            if c["parameterization"] == "sp" and c["width"] == 64 and c["seed"] == 1 and \
                    math.log2(c["lr"]) == -6.5:
                return Outcome(True)
            return base(cell)

    truth = OneSeed()
    grid = cells(widths=[32, 64])
    search, _, by_id = run_search(Search(kind="transfer", settle_octaves=FIT_WINDOW), truth,
                                  grid)
    x = LOG2_GRID
    curve = np.array([np.mean([base(by_id[t]).loss for t in fam.cell_ids(64, i)])
                      for fam in families_of(grid) if fam.label == "sp"
                      for i in range(len(x))])
    curve[list(x).index(-6.5)] = np.nan
    expected = float(fit_optimum(x, curve[None, :], grid_window(x, curve[None, :])).log2_lr[0])
    assert search_optima(search)[("sp", 64)] == pytest.approx(expected, abs=1e-9)


def test_an_lr_some_of_whose_seeds_ran_runs_its_other_seeds_before_the_width_settles():
    # a cell handed out while its LR was wanted finishes after the plan has moved on (its fit
    # moved the support away): the analysis would read that one seed's loss as the LR's, so
    # the search runs the LR's other seeds too
    # (with every seed at every LR; by default one seed is enough so far from the optimum)
    truth = Planted()
    grid = cells(widths=[32, 64])
    every = Search(kind="transfer", seed_tolerance=None)
    done, _, by_id = run_search(every, truth, grid=grid)
    fam = families_of(grid)[0]
    far = fam.ids[(64, 0, SEEDS[0])]  # the grid's lowest LR at width 64, one seed
    assert far not in done.results
    results = {**done.results, far: truth(by_id[far])}
    search = TransferSearch(families_of(grid), every, results)
    assert search.to_run() == [fam.ids[(64, 0, SEEDS[1])]]
    assert not search.complete()
    assert TransferSearch(families_of(grid), Search(kind="transfer"), results).complete()


def test_the_checks_transfer_stage_runs_every_seed_at_every_lr_unless_told():
    # `mutransfer check` decides on the drift's interval, calibrated with every seed at every
    # LR: its sweep keeps that, and its file may ask for seeds where they matter
    from mutransfer.commands.check_spec import CheckSpec

    base = {"name": "c", "model": {"arch": "mamba"}, "param": {"name": "mup_ssm"}}
    sweep = CheckSpec(**base).sweep()
    assert Search(**sweep["search"]).seed_tolerance is None
    told = CheckSpec(**base, check={"search": {"window": 3, "seed_tolerance": 0.02}}).sweep()
    assert Search(**told["search"]).seed_tolerance == 0.02


def test_a_familys_label_names_a_param_axis_by_the_entries_that_differ():
    """The search's log lines (`... width 64: lr* ...`) label a family as the analysis's
    tables do: a `param` axis of whole entries by what differs between them, plain axes by
    their value."""
    plan = prepare("sweeps/depth_rule.yaml", check_data=False)
    labels = {f.label for f in families_of(plan.cells)}
    assert "mup_ssm, model.n_layer=4, param.depth=completep" in labels
    assert ("mup_ssm, model.n_layer=16, param.depth=completep, "
            "param.depth_exponents.hidden.lr_adam=0.375") in labels
    assert not any("{" in label for label in labels)


def test_a_familys_label_shows_a_plain_axis_value_as_written(tmp_path):
    """`sp, optimizer=sgd` (the column the axis fills): a string value unquoted, as the tables
    show it."""
    path = write_sweep(tmp_path, "plain", {"width": [16, 32], "lr": [0.001, 0.01],
                                           "train.optimizer": ["adamw", "sgd"]})
    labels = {f.label for f in families_of(prepare(str(path), check_data=False).cells)}
    assert labels == {"sp, optimizer=adamw", "sp, optimizer=sgd"}


def run_in_order(grid: list[Cell], truth: Planted, at_once: int, pick: Callable) -> set[str]:
    """The cells a search runs when `at_once` run side by side and `pick(running)` says
    which of those running finishes next (its index)."""
    by_id = {c.trial_id: c for c in grid}
    search = TransferSearch(families_of(grid), Search(kind="transfer"))
    running: list[str] = []
    while True:
        while len(running) < at_once and (tid := search.next_trial()) is not None:
            running.append(tid)
        if not running:
            return set(search.results)
        tid = running.pop(pick(running))
        search.finish(tid, truth(by_id[tid]))


@pytest.mark.parametrize("at_once", [2, 3, 8])
def test_the_cells_a_search_runs_do_not_depend_on_the_order_results_come_in(at_once):
    """What runs follows from the results alone: side by side, finishing first-started
    first, last-started first or in a random order, a search runs the cells it runs one at a
    time (so two runs of one sweep, and a run and its replay, run the same trials)."""
    grid = cells(widths=[32, 64, 128], log2_grid=[x / 2 for x in range(-24, -3)])
    truth = Asymmetric(rise=3.0, noise=0.08)
    rng = np.random.default_rng(0)
    one_at_a_time = run_in_order(grid, truth, 1, lambda running: 0)
    for pick in (lambda running: 0, lambda running: len(running) - 1,
                 lambda running: int(rng.integers(len(running)))):
        assert run_in_order(grid, truth, at_once, pick) == one_at_a_time
