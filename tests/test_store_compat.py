"""A store written before sweep/ became plan/ search/ run/ resumes with nothing retrained.

tests/fixtures/old_store/ was written by the sweep code of 416ec03 (its README says how): if a
trial id, a group id or the store's layout changed, today's code would run its trials again.
The ids are pinned here too, so that a change says which ids moved."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import yaml

import mutransfer
from mutransfer.results.store import Store
from mutransfer.sweep.run.driver import prepare
from mutransfer.sweep.search.registry import plan_work

FIXTURE = Path(__file__).parent / "fixtures" / "old_store"
GRID_IDS = {"038d6139b1b00d56", "27e07a9d67546223", "4bb13578a115d803", "633ab0cb5a42d9b2"}
OPTUNA_IDS = {"12d0bfb2f7d7053b", "5b629b3592a2c92a"}


def old_store(tmp_path: Path, name: str) -> tuple[dict, Path]:
    """The sweep document and a copy of its store (a run may write into it)."""
    shutil.copytree(FIXTURE / name, tmp_path / name)
    return yaml.safe_load((FIXTURE / f"{name}.yaml").read_text()), tmp_path / name


def stored_ids(storage: Path) -> set[str]:
    return set(Store(str(storage)).scan(repair=False).complete)


@pytest.mark.parametrize("search", [None, {"kind": "transfer"}], ids=["grid", "transfer"])
def test_a_grid_store_of_the_old_code_runs_nothing_again(tmp_path, search):
    doc, storage = old_store(tmp_path, "old-grid")
    if search is not None:
        doc["search"] = search  # the transfer search runs the grid's cells: the same ids
    assert stored_ids(storage) == GRID_IDS
    assert {c.trial_id for c in prepare(doc, str(storage)).cells} == GRID_IDS
    result = mutransfer.run(doc, storage=str(storage), out=io.StringIO())
    assert (result.to_run, result.remaining, result.ok) == (0, 0, True)
    assert stored_ids(storage) == GRID_IDS


def test_an_optuna_store_of_the_old_code_runs_nothing_again(tmp_path):
    doc, storage = old_store(tmp_path, "old-optuna")
    assert stored_ids(storage) == OPTUNA_IDS
    result = mutransfer.run(doc, storage=str(storage), out=io.StringIO())
    assert (result.to_run, result.remaining, result.ok) == (0, 0, True)
    assert stored_ids(storage) == OPTUNA_IDS


def test_a_wider_width_added_to_the_old_grid_runs_only_its_own_cells(tmp_path):
    doc, storage = old_store(tmp_path, "old-grid")
    doc["axes"]["width"] = [16, 32, 64]
    plan = prepare(doc, str(storage))
    work = plan_work(plan, Store(str(storage)).scan(repair=False))
    assert sorted(c.width for c in work.cells) == [64, 64]
    assert not {c.trial_id for c in work.cells} & GRID_IDS
    assert len(plan.cells) == len(GRID_IDS) + 2
