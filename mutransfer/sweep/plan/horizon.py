"""Horizon branching: the cells of a sweep that differ only in their length share one run.

With `train.schedule: wsd` the LR is the same, step for step, for every length up to that
length's cooldown start, so a run of length L and a run of length L' > L take bit-identical
steps up to L's cooldown. A *horizon family* is the set of grid cells whose resolved configs
are equal once `train.steps` and `train.tokens` are left out (same width, LR, seed and every
other field), with schedule wsd and `train.branch` not false. The sweep runs:

- phase 1: every cell outside a family, and each family's *trunk* (its longest cell not yet
  stored). The trunk saves a *branch point* (its full loop state: model, optimizer, RNG,
  step, history, divergence monitor, the unfinished eval window; the LR schedule and the data
  stream are functions of the step) at the cooldown start of each other pending cell of its
  family, into `checkpoints/branch/<that cell's trial id>.pt`, and its own state at its own
  cooldown start into `checkpoints/horizon/<family id>.pt` (the family's *stable end*);
- phase 2: the other cells of the family. Each starts from its own checkpoint (a resumed
  attempt), else its branch point, else the family's stable end when that lies at or before
  its cooldown start, else from step 0 (a rerun), and trains only its cooldown.

Every cell is a normal trial (its id is the id it would have unbranched: `train.branch` is not
part of trial ids), with every steps row a separate run would have, and `branched_from` (the
trial whose run saved the state it started from) and `branch_step` in its row. A branch point
is removed once its cell is stored; the family's stable end is kept, so that a longer length
added later continues from it. Divergence of the trunk at step d marks each cell whose branch
point it had not reached (cooldown start >= d) as diverged at d, with the trunk's steps rows up
to d: exactly what a separate run would give (same steps, same divergence rule), without
training it. Other searches than grid (optuna, transfer) run every length separately.

This module plans (the families, each cell's role, where a cell starts from: the dry run);
running them is mutransfer/sweep/run/horizon.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from mutransfer.config import TrainConfig
from mutransfer.results.checkpoints import TrialCheckpoint
from mutransfer.results.fs import join
from mutransfer.results.run_settings import without_run_settings
from mutransfer.results.store import Store, StoreState
from mutransfer.sweep.plan.cells import Cell, Plan
from mutransfer.sweep.plan.identity import hash_config


def family_id(config: dict[str, Any]) -> str:
    """The id of a cell's horizon family: its config without the run's length, with the
    run settings at their id's values (a moved token cache is the same family)."""
    config = without_run_settings(config)
    train = {k: v for k, v in config.get("train", {}).items() if k not in ("steps", "tokens")}
    return hash_config({**config, "train": train})


def length_of(config: dict[str, Any]) -> tuple[int, int]:
    """(total steps, cooldown start) of a resolved config."""
    t = TrainConfig.model_validate(config["train"])
    return t.total_steps, t.cooldown_start


@dataclass
class Family:
    """The cells of one horizon family, longest first."""

    family_id: str
    cells: list[Cell] = field(default_factory=list)


def families(plan: Plan) -> list[Family]:
    """The horizon families of a grid plan (two cells or more each)."""
    search = plan.spec.search
    if search.kind != "grid" or search.stop is not None:
        return []  # only a full grid branches: a search or a stop rule decides what runs
    by_id: dict[str, Family] = {}
    for cell in plan.cells:
        train = cell.config["train"]
        if train.get("schedule") != "wsd" or train.get("branch") is False:
            continue
        fid = family_id(cell.config)
        by_id.setdefault(fid, Family(fid)).cells.append(cell)
    out = [f for f in by_id.values() if len(f.cells) > 1]
    for f in out:
        f.cells.sort(key=lambda c: -length_of(c.config)[0])
    return out


def roles(plan: Plan, pending: set[str]) -> dict[str, dict[str, Any]]:
    """trial id -> the horizon role of each pending family cell: the trunk (phase 1, with the
    steps at which it saves branch points) or a branch (phase 2)."""
    out: dict[str, dict[str, Any]] = {}
    for fam in families(plan):
        todo = [c for c in fam.cells if c.trial_id in pending]
        if not todo:
            continue
        trunk, rest = todo[0], todo[1:]
        points = {c.trial_id: length_of(c.config)[1] for c in rest}
        out[trunk.trial_id] = {"role": "trunk", "family": fam.family_id,
                               "start": length_of(trunk.config)[1], "points": points}
        for c in rest:
            out[c.trial_id] = {"role": "branch", "family": fam.family_id,
                               "trunk": trunk.trial_id, "start": points[c.trial_id]}
    return out


# -- where states are kept ---------------------------------------------------------------------
def point_path(store: Store, trial_id: str) -> str:
    """The branch point a cell starts its cooldown from."""
    return join(store.root, "checkpoints", "branch", f"{trial_id}.pt")


def stable_end_path(store: Store, family: str) -> str:
    """The family's latest stable-phase state (its longest run's cooldown start)."""
    return join(store.root, "checkpoints", "horizon", f"{family}.pt")


def state_exists(store: Store, path: str) -> bool:
    """A saved state (a branch point, a stable end) is there."""
    return store.fs.get_file_info(path).type == pafs.FileType.File


def load_state(store: Store, path: str) -> dict[str, Any] | None:
    """A saved state, or None when it is absent or unreadable."""
    import torch  # only where a state is read: planning imports no torch

    if not state_exists(store, path):
        return None
    try:
        with store.fs.open_input_file(path) as f:
            state = torch.load(f, map_location="cpu", weights_only=True)
    except Exception:  # unreadable: as if absent (the cell then starts elsewhere)
        return None
    return state if isinstance(state, dict) else None


def describe(plan: Plan, state: StoreState, store: Store | None) -> list[str]:
    """--dry-run lines: for each family with cells to run, where each starts from."""
    lines = []
    pending = {c.trial_id for c in plan.cells if c.trial_id not in state.complete}
    role_of = roles(plan, pending)
    fams = families(plan)
    if fams:
        full = sum(_tokens(c) for f in fams for c in f.cells)
        shared = sum(_tokens(f.cells[0]) + sum(_tokens(c, cooldown_only=True)
                                               for c in f.cells[1:]) for f in fams)
        lines.append(f"horizon branching: {len(fams)} families of lengths; the whole plan "
                     f"trains {shared:,} tokens branched instead of {full:,} separately "
                     f"({shared / full:.3f}x)")
    for fam in fams:
        todo = [c for c in fam.cells if c.trial_id in pending]
        if not todo:
            continue
        head = todo[0].columns
        lines.append(f"horizon family {fam.family_id[:8]} (width {head.get('width')}, lr "
                     f"{head.get('lr')}, seed {head.get('seed')}): "
                     f"{len(fam.cells) - len(todo)} of {len(fam.cells)} lengths stored")
        end = load_state(store, stable_end_path(store, fam.family_id)) if store else None
        end_step = int(end["step"]) if end is not None else None
        trunk_start = 0
        for c in todo:
            role = role_of[c.trial_id]
            steps, start = length_of(c.config)
            how, at = _origin(store, c.trial_id, role["role"], start, end_step, trunk_start)
            if role["role"] == "trunk":
                trunk_start, how = at, f"trunk, {how}"
            lines.append(f"  {steps} steps (cooldown from step {start}): {how}")
    return lines


def _origin(store: Store | None, trial_id: str, role: str, start: int, end_step: int | None,
            trunk_start: int) -> tuple[str, int]:
    """Where a cell starts, in the order of HorizonCheckpoint.load, and the step it starts at
    (0 for its own checkpoint, which is not read here). A branch whose cooldown start its
    trunk passes (`trunk_start`) gets its point from the trunk this run; one it does not pass
    cannot use the family's stable end either: the trunk, at its own cooldown start by then,
    has replaced it with a later one."""
    if store is not None and TrialCheckpoint(store, trial_id).exists():
        return "resumes its own checkpoint", 0
    if store is not None and state_exists(store, point_path(store, trial_id)):
        return f"branches from the stored branch point at step {start}", start
    if role == "branch":
        if trunk_start <= start:
            return f"branches from the trunk at step {start} (this run)", start
        return "reruns from step 0 (no saved state at or before its cooldown start)", 0
    if end_step is not None and end_step <= start:
        return f"continues the family's saved state at step {end_step}", end_step
    return "from step 0", 0


def _tokens(cell: Cell, cooldown_only: bool = False) -> int:
    """Tokens a cell trains: all its steps, or only its cooldown (a branch)."""
    steps, start = length_of(cell.config)
    train = cell.config["train"]
    return (steps - start if cooldown_only else steps) * train["batch_size"] * train["seq_len"]
