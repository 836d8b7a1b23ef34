"""Fault injection for tests/test_trial_loop_ray.py, loaded by every Python process that has
this folder on PYTHONPATH (Ray's workers too) and acting only where RESUME_MARKS is set.

When mutransfer.results.checkpoints is imported, TrialCheckpoint is wrapped: the first save
in the run (none recorded in RESUME_MARKS yet) SIGKILLs its own process right after the file
is written, and every load that returns a state leaves `resumed-<step>` in RESUME_MARKS.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import signal
import sys
from pathlib import Path

TARGET = "mutransfer.results.checkpoints"


def _patch(module) -> None:
    marks = Path(os.environ["RESUME_MARKS"])
    cls = module.TrialCheckpoint
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


if os.environ.get("RESUME_MARKS"):
    sys.meta_path.insert(0, _Finder())
