"""Cells where only some seeds diverged, LRs not run at a width, and seeds missing from cells.

The rules (docs/results-format.md, "Analysis tables"): a cell enters lr* and regret only when
every seed that ran it trained; a partially diverged cell is shown as such and moves the
stability boundary's onset; an LR the family ran at another width but not at this one is "not
run" (neither trained nor diverged); and a cell's mean is seed-adjusted, so that a seed
missing from a cell does not move it.
"""

import numpy as np
import pandas as pd
import pytest

from mutransfer.analysis import analyze, summary_table
from mutransfer.analysis.render import full_text
from mutransfer.results.store import Tables
from tests.sweeps import LR_GRID, MUP, SP, transfer_search_results
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

TRAINED, PARTIAL, NOT_RUN = "trained", "partial", "not run"  # the cells table's statuses
FLAT = Planted("mup", 2**-7, 0.0, stable_base=2**-4.5)


def one_seed_diverges(t: Tables, lr: float, width: int | None = None, seed: int = 0) -> None:
    """Mark one seed's trial at `lr` diverged, as the trainer stores it (no final loss)."""
    tr = t.trials
    hit = np.isclose(tr.lr, lr) & (tr.seed == seed)
    if width is not None:
        hit &= tr.width == width
    tr.loc[hit, ["status", "diverged", "final_eval_loss", "best_eval_loss"]] = \
        ["diverged", True, np.nan, np.nan]


def group(df: pd.DataFrame, param: str, width: int) -> pd.DataFrame:
    return df[(df.parameterization == param) & (df.width == width)]


@pytest.fixture
def survivor(tmp_path):
    """The audit's case: two seeds; at 2^-6, just above the planted optimum 2^-7 ... 2^-6.4,
    seed 0 diverged at width 256 and seed 1 trained to the lowest loss of the curve."""
    p = Planted("mup", 2**-6.4, 0.0, stable_base=2**-4.5)
    t = synthetic_tables([p], [64, 128, 256], LR_GRID, [0, 1], noise=0.0)
    one_seed_diverges(t, 2**-6, width=256)
    tr = t.trials
    tr.loc[(tr.width == 256) & np.isclose(tr.lr, 2**-6) & (tr.seed == 1),
           "final_eval_loss"] -= 0.1  # the surviving seed looks best of all
    return analyze(write_results(tmp_path, t))


def test_a_surviving_seed_does_not_make_a_cell_trained(survivor):
    cells = group(survivor.cells, "mup", 256).set_index("lr")
    assert cells.loc[2**-6, "status"] == PARTIAL
    assert cells.loc[2**-6, "n_diverged"] == 1 and cells.loc[2**-6, "n_trained"] == 1
    assert (cells.drop(index=2**-6).query("lr < 2**-4.5").status == TRAINED).all()


def test_a_partially_diverged_cell_stays_out_of_lr_star_and_best_loss(survivor):
    opt = group(survivor.lr_opt, "mup", 256).iloc[0]
    assert opt.lr_argmin == 2**-7          # the best cell where both seeds trained
    assert opt.best_loss > 2.9              # not the survivor's 2.9 - 0.1
    # fitted to 2^-9, 2^-8, 2^-7 and 2^-5 of the noiseless bowl: the planted optimum exactly
    assert np.log2(opt.lr_opt) == pytest.approx(-6.4, abs=1e-6)
    assert opt.n_lrs_partial == 1 and "partially diverged (left out): 2^-6" in opt.note


def test_regret_is_not_hidden_by_the_surviving_seed(survivor):
    """lr* at 64 lies nearest 2^-6, where a seed diverged at width 256: regret is inf there."""
    r = group(survivor.regret, "mup", 256).iloc[0]
    assert r.lr_used == 2**-6
    assert r.transfer == "partially diverged" and np.isinf(r.regret)
    assert "1 of 2 trials diverged" in r.note
    assert r.best_loss > 2.9
    r64 = group(survivor.regret, "mup", 64).iloc[0]
    assert r64.transfer == "trained" and r64.regret == pytest.approx(0.0)


def test_stability_reports_the_onset_and_where_every_seed_diverged(survivor):
    st = group(survivor.stability, "mup", 256).iloc[0]
    assert st.largest_trained == 2**-5 and st.smallest_any_diverged == 2**-6
    assert not st.clean and "ambiguous" in st.note  # a seed diverged below a trained LR
    assert st.smallest_all_diverged == 2**-4 and st.largest_any_trained == 2**-5
    assert st.boundary_all == pytest.approx(2**-4.5)
    assert st.n_lrs_partial == 1


def test_one_seed_of_three_moves_the_onset_not_the_all_seeds_boundary(tmp_path):
    t = synthetic_tables([FLAT], [64, 128], LR_GRID, [0, 1, 2])
    one_seed_diverges(t, 2**-5)  # just below the planted boundary 2^-4.5, at both widths
    a = analyze(write_results(tmp_path, t))
    for _, st in a.stability.iterrows():
        assert st.largest_trained == 2**-6 and st.smallest_any_diverged == 2**-5
        assert st.boundary == pytest.approx(2**-5.5) and st.clean
        assert st.largest_any_trained == 2**-5 and st.smallest_all_diverged == 2**-4
        assert "1 LR(s) partially diverged" in st.note
    text = full_text(a)
    assert "first diverged (any seed)" in text and "first diverged (all seeds)" in text


def test_a_trained_trial_without_a_loss_is_neither_trained_nor_diverged(tmp_path):
    t = synthetic_tables([FLAT], [64], LR_GRID, [0, 1])
    tr = t.trials
    tr.loc[np.isclose(tr.lr, 2**-7) & (tr.seed == 1), "final_eval_loss"] = np.nan
    a = analyze(write_results(tmp_path, t))
    cell = a.cells.set_index("lr").loc[2**-7]
    assert cell.status == TRAINED and cell.n_trials == 1 and cell.n_seeds == 1
    assert any("no final loss" in n for n in a.notes)


def test_a_diverged_trial_never_contributes_a_loss(tmp_path):
    """Older stores kept a diverged trial's last finite loss in final_eval_loss: it is
    ignored like the null of newer ones."""
    t = synthetic_tables([FLAT], [64], LR_GRID, [0, 1])
    tr = t.trials
    at = np.isclose(tr.lr, 2**-4)
    assert tr.loc[at, "diverged"].all() and tr.loc[at, "final_eval_loss"].isna().all()
    assert (tr.loc[at, "last_finite_loss"] > 0).all()
    tr.loc[at, "final_eval_loss"] = 0.5  # far below every trained loss
    a = analyze(write_results(tmp_path, t))
    cell = a.cells.set_index("lr").loc[2**-4]
    assert cell.status == "diverged" and np.isnan(cell.mean_loss)
    assert a.lr_opt.best_loss.iloc[0] > 2.9


# -- a different LR set per width (a transfer search) -----------------------------------------


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    root = transfer_search_results(tmp_path_factory.mktemp("search"), noise=0.005)
    return analyze(root)


def test_lrs_not_run_at_a_width_are_listed_and_not_counted(windows):
    sp256 = group(windows.cells, "sp", 256).set_index("lr")
    # sp's lr* at 256 is 2^-10: the window 2^-12..2^-8, the rest of the grid not run
    assert sorted(sp256.index[sp256.status == NOT_RUN]) == [2**-7, 2**-6, 2**-5, 2**-4]
    assert (sp256.loc[sp256.status == NOT_RUN, "n_trials"] == 0).all()
    opt = group(windows.lr_opt, "sp", 256).iloc[0]
    assert opt.n_lrs_not_run == 4 and opt.lrs_not_run == "2^-7..2^-4"
    assert opt.n_lrs_diverged == 0 and opt.n_lrs == 5
    assert "not run at this width: 2^-7..2^-4" in opt.note
    assert not opt.edge  # the window brackets the optimum
    assert group(windows.lr_opt, "sp", 64).iloc[0].n_lrs_not_run == 0


def test_not_run_is_not_diverged(windows):
    """sp at 256 never ran 2^-7 and above, where the full grid diverges: no boundary there."""
    st = group(windows.stability, "sp", 256).iloc[0]
    assert np.isnan(st.smallest_any_diverged) and st.largest_trained == 2**-8
    assert st.n_lrs_not_run == 4 and st.n_lrs_diverged == 0
    assert "above the LRs run" in st.note


def test_drift_from_windows_matches_the_planted_exponents(windows):
    d = windows.drift.set_index("parameterization")
    assert d.loc["sp", "slope"] == pytest.approx(-1.0, abs=0.05)
    assert d.loc["mup", "slope"] == pytest.approx(0.0, abs=0.05)


def test_regret_says_when_the_transferred_lr_was_not_run(windows):
    r = group(windows.regret, "sp", 512).iloc[0]
    # lr* at 64 is 2^-8; sp's window at 512 is 2^-12..2^-9: the nearest LR run is 2^-9
    assert r.lr_nearest == 2**-8 and not r.nearest_run
    assert r.lr_used == 2**-9 and r.lr_gap_log2 == pytest.approx(1.0, abs=0.1)
    assert "2^-8 (nearest to lr*) not run at this width; used 2^-9" in r.note
    assert group(windows.regret, "sp", 128).iloc[0].nearest_run


def test_a_failed_trial_leaves_its_cell_to_the_seeds_that_ran(windows):
    cell = group(windows.cells, "sp", 512).set_index("lr").loc[2**-11]
    assert cell.status == TRAINED and cell.n_seeds == 1 and cell.n_trials == 1


def test_summary_and_report_text_name_the_lrs_left_out(windows):
    text = summary_table(windows)
    assert "sp, width 256: not run 2^-7..2^-4" in text
    full = full_text(windows)
    assert "not run at this width" in full


def test_optuna_samples_are_never_reported_as_not_run(tmp_path):
    t = synthetic_tables([SP, MUP], [64, 128], None, [0, 1], random_lrs=(2**-14, 2**-4, 20))
    a = analyze(write_results(tmp_path, t))
    assert (a.cells.status != NOT_RUN).all()
    assert (a.lr_opt.n_lrs_not_run == 0).all()


# -- a seed missing from a cell must not bias the cell's mean ---------------------------------


def test_a_seed_missing_from_a_cell_does_not_move_its_mean(tmp_path):
    """No noise, seed offsets only: every cell mean is the planted bowl exactly, including
    the cells where the seed that runs high (or low) did not run."""
    t = synthetic_tables([FLAT], [64], LR_GRID, [0, 1, 2], noise=0.0, seed_sd=0.05)
    tr = t.trials

    def bowl(lr):
        return FLAT.best_loss(64, 64) + FLAT.curvature * (np.log2(lr) + 7) ** 2

    offsets = (tr.final_eval_loss - bowl(tr.lr)).groupby(tr.seed).mean()
    assert offsets.max() - offsets.min() > 0.05  # the seeds do differ
    missing = (tr.seed == offsets.idxmin()) & tr.lr.isin([2**-8, 2**-7])
    t.trials = tr[~missing]
    a = analyze(write_results(tmp_path, t))
    cells = a.cells[a.cells.status == TRAINED].set_index("lr")
    # the bowl plus the average seed's offset, at every LR
    np.testing.assert_allclose(cells.mean_loss, bowl(cells.index) + offsets.mean(), atol=1e-9)
    assert cells.loc[2**-7, "n_seeds"] == 2
    # the plain mean of the two remaining seeds is biased by the missing seed's offset
    assert abs(cells.loc[2**-7, "raw_mean_loss"] - cells.loc[2**-7, "mean_loss"]) > 0.01
    assert np.log2(a.lr_opt.lr_opt.iloc[0]) == pytest.approx(-7, abs=1e-6)


def test_with_every_seed_everywhere_the_mean_is_the_plain_mean(tmp_path):
    t = synthetic_tables([SP], [64], LR_GRID, [0, 1, 2], seed_sd=0.05)
    a = analyze(write_results(tmp_path, t))
    c = a.cells[a.cells.status == TRAINED]
    np.testing.assert_allclose(c.mean_loss, c.raw_mean_loss, rtol=0, atol=1e-12)
