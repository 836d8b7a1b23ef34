"""Horizon branching, running: a family cell's checkpointer (its branch points and the
states it starts from), a branch whose trunk diverged before it, and the two phases of a run.
What the families are and which role each cell plays: mutransfer/sweep/plan/horizon.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd

from mutransfer.config import TrialConfig
from mutransfer.results.checkpoints import MAX_OVERHEAD, TrialCheckpoint
from mutransfer.results.fs import delete_quietly, write_atomic
from mutransfer.results.later_fields import same_trial_text
from mutransfer.results.store import Store
from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.plan.horizon import (
    load_state,
    point_path,
    roles,
    stable_end_path,
    state_exists,
)
from mutransfer.sweep.search.base import Work


def save_state(store: Store, path: str, state: dict[str, Any]) -> None:
    """Write a state (a branch point, a stable end) whole or not at all."""
    import torch  # a trial's worker has it already; the driver never saves a state

    write_atomic(store.fs, path, lambda out: torch.save(state, out))


class HorizonCheckpoint(TrialCheckpoint):
    """A family cell's checkpointer: its own mid-trial checkpoint as for any trial, plus the
    states it may start from (see the module docstring) and, for a trunk, the branch points
    it saves (`branch_steps`, `save_branch`, which the trainer calls)."""

    def __init__(self, store: Store, trial_id: str, config: dict[str, Any],
                 role: dict[str, Any], max_overhead: float | None = MAX_OVERHEAD):
        super().__init__(store, trial_id, max_overhead)
        self.role = role
        self.config_text = TrialConfig.model_validate(config).model_dump_json()
        self.origin: dict[str, Any] | None = None  # {"from": trial id, "step": n}
        points = role.get("points", {}) if role.get("role") == "trunk" else {}
        self.points: dict[int, list[str]] = {}
        for tid, step in points.items():
            self.points.setdefault(int(step), []).append(tid)
        self.branch_steps = set(self.points) | (
            {int(role["start"])} if role.get("role") == "trunk" else set())

    def load(self) -> dict[str, Any] | None:
        state = self._start_state()
        if state is not None and int(state.get("step", -1)) in self.branch_steps:
            # the loop resumes after this step, so it never offers the states due at the step
            # itself: a trunk killed between its eval checkpoint and those saves, or one that
            # continues a stable end at a shorter cell's cooldown start, writes them now
            self.save_branch(int(state["step"]), state)
        return state

    def _start_state(self) -> dict[str, Any] | None:
        """Its own checkpoint, else its branch point, else the family's stable end when
        that lies at or before its cooldown start; None: it starts from step 0. An own
        checkpoint of another config (an earlier release's, a copied store's) is one the
        trainer refuses: it does not hide the states this cell can start from."""
        own = super().load()
        if own is not None and same_trial_text(own.get("config"), self.config_text):
            self.origin = own.get("horizon")
            return own
        if own is not None:
            warnings.warn(f"checkpoint {self.path} was saved by another trial config, "
                          f"ignored", stacklevel=2)
        for path in (point_path(self.store, self.trial_id),
                     stable_end_path(self.store, self.role["family"])):
            state = load_state(self.store, path)
            if state is not None and int(state.get("step", -1)) <= int(self.role["start"]):
                return self._adopt(state)
        return None

    def _adopt(self, state: dict[str, Any]) -> dict[str, Any]:
        """A state another run of the family saved, as this cell's: its config text, and
        the wall time this cell's row reports counting from here."""
        self.origin = dict(state.get("horizon") or {})
        return {**state, "config": self.config_text, "wall_s": 0.0}

    def save(self, state: dict[str, Any]) -> bool:
        if self.origin is not None:
            state = {**state, "horizon": self.origin}
        return super().save(state)

    def save_branch(self, step: int, state: dict[str, Any]) -> None:
        """Called by the trainer right after `step` (a step of `branch_steps`)."""
        adopted = self.origin is not None and self.origin.get("step") == step
        # a state this cell adopted at `step` keeps naming the run that computed it
        origin = dict(self.origin) if adopted else {"from": self.trial_id, "step": step}
        mark = {**state, "horizon": origin}
        for tid in self.points.get(step, []):
            if not state_exists(self.store, point_path(self.store, tid)):
                save_state(self.store, point_path(self.store, tid), mark)
        if step == int(self.role["start"]):
            path = stable_end_path(self.store, self.role["family"])
            old = load_state(self.store, path)
            if old is None or int(old.get("step", -1)) < step:
                save_state(self.store, path, mark)

    def columns(self) -> dict[str, Any]:
        """`branched_from` and `branch_step` of this cell's row."""
        if not self.origin:
            return {"branched_from": None, "branch_step": None}
        return {"branched_from": self.origin.get("from"), "branch_step": self.origin.get("step")}

    def remove(self) -> None:
        super().remove()
        delete_quietly(self.store.fs, point_path(self.store, self.trial_id))


def diverged_in_trunk(store: Store, trial_id: str, role: dict[str, Any]
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A branch whose trunk diverged at d <= its cooldown start, with no state to start
    from: (the outcome columns of its row, its steps rows), copied from the trunk's; else
    None (it trains)."""
    if role.get("role") != "branch" or state_exists(store, point_path(store, trial_id)):
        return None
    trunk = store.finished_row(role["trunk"])
    if trunk is None or trunk.get("status") != "diverged":
        return None
    d = trunk.get("diverge_step")
    if d is None or int(d) > int(role["start"]):
        return None
    steps = store.read_part(store.step_part(role["trunk"], str(trunk["attempt"])))
    points = [{k: _plain(v) for k, v in r.items() if k not in ("trial_id", "attempt")}
              for r in steps.sort_values("step").to_dict("records")]
    keys = ("status", "diverged", "diverge_step", "final_eval_loss", "best_eval_loss",
            "last_finite_loss", "initial_loss", "max_excursion", "steps_above_bound",
            "steps_done", "tokens", "tokens_per_s", "params",
            *[k for k in trunk if str(k).startswith("tau_")])
    outcome = {k: _plain(trunk.get(k)) for k in keys}
    outcome.update(wall_time_s=0.0, branched_from=role["trunk"], branch_step=int(d))
    return outcome, points


def _plain(value: Any) -> Any:
    """numpy / pandas scalars as Python values (NA as None)."""
    try:
        if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
            return None
    except (TypeError, ValueError):
        pass
    return value.item() if hasattr(value, "item") else value


# -- running in two phases ---------------------------------------------------------------------
def attach(plan: Plan, work: Work) -> None:
    """Give `work` the horizon roles of its pending cells."""
    work.horizon = roles(plan, {c.trial_id for c in work.cells})


def phases(work: Work) -> list[list[Cell]]:
    """The cells of phase 1 (all but the branches) and phase 2 (the branches); one phase
    when there is nothing to branch."""
    branch = {t for t, r in work.horizon.items() if r["role"] == "branch"}
    first = [c for c in work.cells if c.trial_id not in branch]
    second = [c for c in work.cells if c.trial_id in branch]
    return [first, second] if second else [first]


def run_phases(plan: Plan, store: Store, work: Work, options: Any,
               execute: Callable[..., Any]) -> Any:
    """`execute` (runner.execute) once per phase; the outcomes summed. A stopped phase 1
    (Ctrl-C) skips phase 2: its cells count as unfinished, and a re-run resumes. Only a
    full grid has families (plan/horizon.py `families`): any other search runs in one."""
    attach(plan, work)
    parts = phases(work)
    if len(parts) == 1:
        return execute(plan, store, work, options)
    total = None
    for cells in parts:
        outcome = execute(plan, store, replace(work, cells=cells), options)
        if total is None:
            total = replace(outcome, to_run=work.n_trials)
        else:
            total.complete += outcome.complete
            total.diverged += outcome.diverged
            total.failed += outcome.failed
            total.stopped += outcome.stopped
            total.skipped += outcome.skipped
            total.elapsed_s += outcome.elapsed_s
        if outcome.unfinished:
            break
    return total


def row_columns(checkpoint: Any) -> dict[str, Any]:
    """`branched_from` / `branch_step` for any trial's row (null unless it branched)."""
    if isinstance(checkpoint, HorizonCheckpoint):
        return checkpoint.columns()
    return {"branched_from": None, "branch_step": None}

