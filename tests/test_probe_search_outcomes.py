"""How a transfer search takes in an outcome that is not a trained loss: a trial that failed for
good (a UserError, which the trial records and returns, not raises), and LRs that ran without
a loss the fit can read (stopped early, diverged). No Ray cluster: Tune is played by hand."""

from __future__ import annotations

import math

from mutransfer.sweep.plan.cells import Cell
from mutransfer.sweep.plan.spec import Search
from mutransfer.sweep.search.families import families_of
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch, describe


def grid(widths=(16, 32), log2_lrs=range(-12, -3), seeds=(0,)) -> list[Cell]:
    return [Cell(f"sp-{w}-{x}-{s}", {"width": w},
                 {"width": w, "parameterization": "sp", "lr": float(2.0 ** x), "seed": s})
            for w in widths for x in log2_lrs for s in seeds]


def test_a_trial_that_failed_for_good_is_a_failure_to_the_live_search_as_to_its_replay():
    # the trainable stores a UserError as status `failed` and returns its row: Tune sees a
    # completed trial without an error. The offline replay (strategy.offline) counts that row
    # as a failure, so the live search must too, or the two plan differently
    from mutransfer.sweep.search.transfer.searcher import TransferSearcher

    cells = grid()
    search = TransferSearch(families_of(cells), Search(kind="transfer"))
    searcher = TransferSearcher(search)
    first = searcher.suggest("tune-0")["trial_id"]
    searcher.on_trial_complete("tune-0", {"trial_id": first, "status": "failed",
                                          "final_eval_loss": math.nan, "objective": 1e6})
    assert search.failed == {first}
    assert first not in search.results and first not in search.to_run()


def test_a_settled_width_says_how_many_of_the_lrs_it_ran_its_fit_could_not_read():
    cells = grid(widths=(16,))
    fam = families_of(cells)[0]
    results = {fam.ids[(16, i, 0)]: Outcome(False, 3.0 + 0.05 * (i - 5) ** 2)
               for i in range(9)}
    for i in (3, 4, 7):  # stopped early: ran, no final loss
        results[fam.ids[(16, i, 0)]] = Outcome(False)
    search = TransferSearch([fam], Search(kind="transfer"), results)
    plan = search.plans()[0][0]
    assert plan.settled
    line = describe(fam, plan, "settled")
    assert "from 9 of 9 LRs (3 of them diverged or stopped early: not in the fit)" in line, line
