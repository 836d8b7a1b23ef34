"""The transfer search as Ray Tune's searcher: hands out the trial ids of the cells the search
(decisions.py) wants, one per Tune trial, and feeds each outcome back.

Families progress independently: whichever family has a cell to run gets the next free slot,
the widest cells first. `suggest` answers None while every wanted cell is running (Tune asks
again later) and FINISHED once nothing runs and nothing is left, so the Tuner ends.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search import Searcher

from mutransfer.sweep.search.base import Reports
from mutransfer.sweep.search.searcher import OwnedSearcher
from mutransfer.sweep.search.transfer.decisions import Outcome, TransferSearch


class TransferSearcher(OwnedSearcher):
    def __init__(self, search: TransferSearch, progress: Reports | None = None):
        super().__init__()  # owner: Tune's trial id -> the cell's trial id
        self.search = search
        self.progress = progress
        self._report()

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        cell = self.search.next_trial()
        if cell is None:
            return Searcher.FINISHED if self.search.idle else None
        self.owner[trial_id] = cell
        self._report()
        return {"trial_id": cell}

    def unit_complete(self, cell: str, trial_id: str, result: dict | None,
                      error: bool) -> None:
        # a trial that failed for good (a UserError: recorded by the trial itself, which
        # returns normally) is a failure, as the store and the offline replay count it, not a
        # cell that ran without a loss
        if error or not result or result.get("status") == "failed":
            self.search.fail(cell)
        else:
            self.search.finish(cell, Outcome.of_row(result))
        self._report()

    def save(self, checkpoint_path: str) -> None:
        """Nothing to save: the store is the search's checkpoint (a re-run replays it)."""

    def restore(self, checkpoint_path: str) -> None:
        """Nothing to restore (see `save`)."""

    def _report(self) -> None:
        """What the search decided (windows opened, widths settled) and the count it expects."""
        if self.progress is None:
            return
        for line in self.search.news():
            self.progress.message(line)
        self.progress.expected = self.search.expected()
