"""A trial that ends finding its result stored already (`skipped`: an earlier attempt's part,
a part copied into the store meanwhile) stored nothing in this run: the progress line and the
run's counts say so apart, instead of counting it complete ("ran 4 trials: 4 complete" when
every result had been copied in while the sweep ran)."""

from __future__ import annotations

import io
from types import SimpleNamespace

from mutransfer.sweep.run.callbacks import TuneProgress
from mutransfer.sweep.run.progress import Progress
from mutransfer.sweep.run.runner import RunOutcome


def _trial(tune_id: str, cell: str, status: str, skipped: bool) -> SimpleNamespace:
    # Tune writes its own trial id into every result, over the trainable's `trial_id`
    result = {"trial_id": tune_id, "status": status, "skipped": skipped}
    return SimpleNamespace(trial_id=tune_id, config={"trial_id": cell}, last_result=result)


def _watch(trials: list[SimpleNamespace]) -> tuple[TuneProgress, Progress]:
    progress = Progress(len(trials), out=io.StringIO(), tty=False, every_s=0)
    units = {t.config["trial_id"]: SimpleNamespace(trial_id=t.config["trial_id"])
             for t in trials}
    watcher = TuneProgress(progress, store=None, units=units, sweep="s")
    for t in trials:
        watcher.on_trial_start(0, trials, t)
        watcher.on_trial_complete(0, trials, t)
    return watcher, progress


def test_a_trial_that_found_its_result_stored_is_not_counted_complete():
    watcher, progress = _watch([_trial("t1", "aaaa", "complete", skipped=True),
                                _trial("t2", "bbbb", "complete", skipped=False),
                                _trial("t3", "cccc", "diverged", skipped=True)])
    assert (progress.complete, progress.diverged, progress.skipped) == (1, 0, 2)
    assert progress.finished_count == 3
    assert "done 1 " in progress.line() and "stored already 2" in progress.line()


def test_the_skipped_trials_are_named_by_their_store_trial_id_not_tunes():
    watcher, _ = _watch([_trial("t1", "aaaa", "complete", skipped=True),
                         _trial("t2", "bbbb", "complete", skipped=False)])
    assert watcher.skipped == {"aaaa"}


def test_the_progress_line_says_nothing_of_stored_trials_when_there_are_none():
    _, progress = _watch([_trial("t1", "aaaa", "complete", skipped=False)])
    assert "stored already" not in progress.line()


def test_a_run_whose_trials_all_found_their_results_stored_is_not_interrupted():
    # skipped trials finished: they are part of `complete` in the outcome (so that the sum of
    # a horizon run's phases counts them), and apart in `skipped`
    outcome = RunOutcome(to_run=4, complete=4, skipped=4)
    assert outcome.unfinished == 0
