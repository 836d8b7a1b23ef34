"""Checkpoints of running trials, kept in the store: `checkpoints/<trial_id>.pt`.

The trainer hands its full loop state to `TrialCheckpoint.save` at eval points (see
`mutransfer.train.run_trial`); a retried, pre-empted or re-run trial finds it with `load` and
resumes there. `remove` deletes it once the trial's part is stored. Files go through the
store's pyarrow filesystem, written to a dot-file and renamed into place, so a local folder, a
shared filesystem and object storage all work and no reader ever sees half a checkpoint.

A trial is deterministic, so any checkpoint of it is a valid state: one file per trial,
replaced at each save (two workers of one trial, e.g. a zombie beside its retry, both write
states of the same run). Loading uses `torch.load(weights_only=True)`: plain tensors and
containers only, never arbitrary objects.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pyarrow.fs as pafs
import torch

from mutransfer.errors import first_line
from mutransfer.results.fs import delete_quietly, join, write_atomic
from mutransfer.results.store import CHECKPOINTS, Store

# Checkpointing may cost at most this fraction of a trial's time: a save is skipped while the
# time since the last one is under (last save's duration / MAX_OVERHEAD).
MAX_OVERHEAD = 0.05


class TrialCheckpoint:
    """The checkpoint of one trial in a store (the trainer's `Checkpointer`)."""

    def __init__(self, store: Store, trial_id: str, max_overhead: float | None = MAX_OVERHEAD):
        """`max_overhead`: see MAX_OVERHEAD; None saves at every eval point offered."""
        self.store, self.trial_id, self.max_overhead = store, trial_id, max_overhead
        self.last_save_end: float | None = None
        self.last_save_s = 0.0

    @property
    def path(self) -> str:
        return join(self.store.root, CHECKPOINTS, f"{self.trial_id}.pt")

    def exists(self) -> bool:
        return self.store.fs.get_file_info(self.path).type == pafs.FileType.File

    def due(self) -> bool:
        """Whether a save now keeps checkpointing within `max_overhead` of the trial's time."""
        if self.max_overhead is None or self.last_save_end is None:
            return True
        since = time.perf_counter() - self.last_save_end
        return since * self.max_overhead >= self.last_save_s

    def save(self, state: dict[str, Any]) -> bool:
        """Write `state` (tensors, numbers, strings, lists, dicts) if due; True when written."""
        if not self.due():
            return False
        t0 = time.perf_counter()
        write_atomic(self.store.fs, self.path, lambda out: torch.save(state, out))
        self.last_save_end = time.perf_counter()
        self.last_save_s = self.last_save_end - t0
        return True

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none or it cannot be read (a damaged file is
        reported and ignored: the trial then starts from step 0)."""
        if not self.exists():
            return None
        try:
            with self.store.fs.open_input_file(self.path) as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as exc:  # truncated zip, foreign pickle, I/O: all mean unusable
            warnings.warn(f"checkpoint {self.path} unreadable, ignored ({type(exc).__name__}: "
                          f"{first_line(exc)})", stacklevel=2)
            return None
        if not isinstance(state, dict):
            warnings.warn(f"checkpoint {self.path} is not a trainer state, ignored",
                          stacklevel=2)
            return None
        return state

    def remove(self) -> None:
        delete_quietly(self.store.fs, self.path)
