"""`mutransfer validate` refuses a file:// storage that `sweep` would refuse, as it refuses
the same folder given as a plain path (before: a file:// URI was not looked at: ok, exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mutransfer.cli import main
from mutransfer.results.store import MARKER

ROOT = Path(__file__).parent.parent


def sweep_file(tmp_path: Path, storage: str) -> Path:
    path = tmp_path / "sweep.yaml"
    text = (ROOT / "sweeps" / "quickstart.yaml").read_text()
    path.write_text(text.replace("name: quickstart\n",
                                 f"name: quickstart\nstorage: '{storage}'\n"))
    return path


@pytest.fixture
def places(tmp_path) -> dict[str, Path]:
    store = tmp_path / "store"
    (store / "trials").mkdir(parents=True)
    (store / "steps").mkdir()
    (store / MARKER).write_text('{"format": 1}\n')
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    (tmp_path / "a-file").write_text("x")
    return {"inside a store's tables": store / "trials",
            "a folder of other files": tmp_path / "notes", "a file": tmp_path / "a-file"}


@pytest.mark.parametrize("what,needle", [
    ("inside a store's tables", "inside the results store"),
    ("a folder of other files", "not a mutransfer results store"),
    ("a file", "is a file, not a folder"),
])
@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file URI"])
def test_a_storage_sweep_would_refuse_is_refused_as_a_path_or_a_file_uri(
        tmp_path, capsys, places, what, needle, as_uri):
    target = places[what]
    storage = target.as_uri() if as_uri else str(target)
    assert main(["validate", "--no-data", str(sweep_file(tmp_path, storage))]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: storage {storage}: ") and needle in err, err


def test_a_new_folder_as_a_file_uri_is_a_valid_storage(tmp_path, capsys):
    storage = (tmp_path / "results" / "new").as_uri()
    assert main(["validate", "--no-data", str(sweep_file(tmp_path, storage))]) == 0
    assert f"ok, 108 cells -> {storage}" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()


def test_validate_says_how_much_of_the_sweep_its_store_holds(tmp_path, capsys):
    """Before: 'ok, 108 cells' whatever the store held (a finished sweep read as if nothing
    had run; only --dry-run said so). A new folder says nothing of stored trials."""
    from mutransfer.results.store import Store
    from mutransfer.sweep.plan.cells import load_plan
    from tests.test_store import run_trial

    storage = tmp_path / "results" / "qs"
    path = sweep_file(tmp_path, str(storage))
    store = Store(storage)
    for cell in load_plan(path).cells[:2]:
        run_trial(store, cell.trial_id)
    assert main(["validate", "--no-data", str(path)]) == 0
    assert f"ok, 108 cells -> {storage} (2 stored, 106 to run)" in capsys.readouterr().out
