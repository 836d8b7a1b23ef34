"""Fault injection for the Ray tests, loaded by every Python process that has this folder on
PYTHONPATH (Ray's workers too) and acting only where its variable is set.

When mutransfer.results.checkpoints is imported, TrialCheckpoint is wrapped:

- RESUME_MARKS=DIR (tests/test_trial_loop_ray.py): the first save in the run (none recorded
  in DIR yet) SIGKILLs its own process right after the file is written, and every load that
  returns a state leaves `resumed-<step>` in DIR.
- TRIAL_GATE=DIR (tests/gate.py): while DIR/hold exists and DIR/open does not, a trial
  offering its state at an eval point (it has stored its first step rows: it is mid-trial)
  leaves `held-<pid>` in DIR and waits there until DIR/open appears. A test holds the
  trials it wants to catch running, does its fault, then opens the gate; short trials
  then finish at once.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

TARGET = "mutransfer.results.checkpoints"
GATE_POLL_S = 0.05


def _kill_after_first_save(cls, marks: Path) -> None:
    save, load = cls.save, cls.load

    def save_then_die(self, state):
        done = save(self, state)
        if done and not (marks / "killed").exists():
            (marks / "killed").write_text(str(state["step"]))
            os.kill(os.getpid(), signal.SIGKILL)
        return done

    def load_and_mark(self):
        state = load(self)
        if state is not None:
            (marks / f"resumed-{state['step']}").write_text("")
        return state

    cls.save, cls.load = save_then_die, load_and_mark


def _hold_at_the_gate(cls, gate: Path) -> None:
    save = cls.save

    def wait_then_save(self, state):
        if (gate / "hold").exists() and not (gate / "open").exists():
            mark = gate / f"held-{os.getpid()}"
            mark.with_suffix(".tmp").write_text(self.trial_id)
            mark.with_suffix(".tmp").replace(mark)  # whole when seen
            while not (gate / "open").exists():
                time.sleep(GATE_POLL_S)
        return save(self, state)

    cls.save = wait_then_save


def _patch(module) -> None:
    if os.environ.get("RESUME_MARKS"):
        _kill_after_first_save(module.TrialCheckpoint, Path(os.environ["RESUME_MARKS"]))
    if os.environ.get("TRIAL_GATE"):
        _hold_at_the_gate(module.TrialCheckpoint, Path(os.environ["TRIAL_GATE"]))


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


if os.environ.get("RESUME_MARKS") or os.environ.get("TRIAL_GATE"):
    sys.meta_path.insert(0, _Finder())
