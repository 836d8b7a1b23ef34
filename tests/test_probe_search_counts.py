"""What a transfer search says it will run (`validate`, `--dry-run`) holds for grids and options
at their edges: a window wider than the grid, a grid of one LR, a width where nothing trains,
a width an earlier run reached before the sweep file was edited. No Ray."""

from __future__ import annotations

import math

import numpy as np

from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.search.families import families_of
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch, settle_count
from mutransfer.sweep.search.transfer.listing import transfer_listing, transfer_summary


def grid(widths, log2_lrs, seeds=(0,)) -> list[Cell]:
    return [Cell(f"sp-{w}-{x}-{s}", {"width": w},
                 {"width": w, "parameterization": "sp", "lr": float(2.0 ** x), "seed": s})
            for w in widths for x in log2_lrs for s in seeds]


def bowl(opt: float, stable: float = math.inf):
    """A parabola in log2 LR around `opt`; every LR above `stable` diverges."""
    def outcome(cell: Cell) -> Outcome:
        x = math.log2(cell.columns["lr"])
        return Outcome(True) if x > stable else Outcome(False, 3.0 + 0.05 * (x - opt) ** 2)
    return outcome


def run_to_end(search: TransferSearch, truth, cells: list[Cell]) -> list[str]:
    by_id = {c.trial_id: c for c in cells}
    ran: list[str] = []
    for _ in range(10_000):
        tid = search.next_trial()
        if tid is None:
            assert search.idle
            return ran
        ran.append(tid)
        search.finish(tid, truth(by_id[tid]))
    raise AssertionError("the search did not end")


def test_the_least_count_holds_when_the_window_is_wider_than_the_walks_start():
    # one width, 13 quarter-octave LRs, window 50: the walk starts with three LRs and settles
    # on five; the old count took the (capped) window at the walking width: 39 for 15 run
    cells = grid([256], np.arange(13) * 0.25 - 11.5, seeds=(0, 1, 2))
    search = TransferSearch(families_of(cells), Search(kind="transfer", window=50))
    least, _, most = search.bounds()
    ran = run_to_end(search, bowl(-10.0), cells)
    assert least <= len(ran) <= most, (least, len(ran), most)


def test_the_least_count_holds_when_nothing_trains_below_a_width_and_it_walks():
    # the full width diverges everywhere: the next widths have nothing to predict from and
    # walk (three LRs), not a window of five
    cells = grid([64, 128, 256], np.arange(7) * 0.5 - 7.5, seeds=(0, 1, 2))
    search = TransferSearch(families_of(cells), Search(kind="transfer", window=5,
                                                       full_widths=1))
    least, _, most = search.bounds()
    ran = run_to_end(search, bowl(-5.0, stable=-9.0), cells)
    assert least <= len(ran) <= most, (least, len(ran), most)


def test_the_typical_count_of_lrs_a_width_is_never_more_than_the_grid_holds():
    one_lr = families_of(grid([16, 32], [-7.0]))[0]
    assert settle_count(one_lr, Search(kind="transfer")) == 1
    seven = families_of(grid([16, 32], np.arange(7) - 10.0))[0]
    assert settle_count(seven, Search(kind="transfer", window=1000)) == 7
    text = transfer_summary(TransferSearch([seven], Search(kind="transfer", window=1000)))
    assert "1000" not in text and "about 7 LRs a width" in text, text


def test_a_dry_run_counts_the_lrs_an_earlier_run_left_at_a_width_it_has_not_reached():
    # an earlier run settled widths 16 and 32 on a narrower grid; the edited file widens it,
    # so width 16 walks on and width 32 waits, with its three LRs still done
    cells = grid([16, 32], np.arange(10) - 12.0)
    fam = families_of(cells)[0]
    truth = bowl(-6.0)
    by_id = {c.trial_id: c for c in cells}
    old = {fam.ids[(16, i, 0)] for i in (3, 4, 5, 6)} | {fam.ids[(32, i, 0)] for i in (4, 5, 6)}
    search = TransferSearch([fam], Search(kind="transfer"),
                            {t: truth(by_id[t]) for t in old})
    assert len(search.plans()[0]) == 1  # width 32 not reached
    rows = [line.split() for line in transfer_listing(search).splitlines()[1:]]
    width_32 = next(r for r in rows if r[1] == "32")
    assert width_32[5] == "3", transfer_listing(search)  # "LRs done"


def test_a_dry_run_of_a_settled_width_counts_the_lrs_it_widened_to_not_only_its_window():
    # a width that walked and widened past its first LRs keeps saying so once it settles
    cells = grid([16], np.arange(10) - 12.0)
    search = TransferSearch(families_of(cells), Search(kind="transfer"))
    run_to_end(search, bowl(-6.0), cells)
    plan = search.plans()[0][0]
    assert plan.settled
    lo, hi = plan.window
    beyond = int(plan.stats.done.sum()) - (hi - lo + 1)
    assert beyond > 0
    row = next(line for line in transfer_listing(search).splitlines()[1:])
    assert f"+{beyond} widened" in row, transfer_listing(search)
