"""A gate that holds trials mid-trial, so that a test's fault lands inside a trial without
long trials or a timed guess: processes started with `Gate.env` load tests/faulthooks, and
while the gate holds, each trial stops at its first checkpoint offer (its first step rows
already stored) until the gate opens."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOOKS = Path(__file__).resolve().parent / "faulthooks"
REPO = HOOKS.parents[1]


@dataclass(frozen=True)
class Gate:
    folder: Path

    @property
    def env(self) -> dict[str, str]:
        """Variables for the processes whose trials the gate controls (Ray nodes, drivers)."""
        return {"TRIAL_GATE": str(self.folder),
                "PYTHONPATH": os.pathsep.join([str(HOOKS), str(REPO),
                                               *filter(None, [os.environ.get("PYTHONPATH")])])}

    def hold(self) -> None:
        """Trials that reach an eval point from now on wait there."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for mark in [self.folder / "open", *self.folder.glob("held-*")]:
            mark.unlink(missing_ok=True)
        (self.folder / "hold").touch()

    def open(self) -> None:
        """Held trials go on; later ones do not stop."""
        (self.folder / "open").touch()

    def held_pids(self) -> list[int]:
        """Pids of the processes (Ray's trial workers) that have waited at the gate."""
        return [int(p.name.split("-")[1]) for p in self.folder.glob("held-*") if not p.suffix]

    def held(self) -> set[str]:
        """Ids of the trials that have waited at the gate."""
        return {p.read_text() for p in self.folder.glob("held-*") if not p.suffix}
