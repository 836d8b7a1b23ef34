"""A store whose trials/ (steps/, running/, checkpoints/, quarantine/, history/, tune/) is a
file, not a folder, or whose sweep.yaml or driver.lease is a folder, is refused in one line
before anything runs. Before, with a file at trials/ a sweep trained every trial, failed each
three times writing its part (FileExistsError ... trials), could not record the failures
either, and ended "4 failed" with exit 1; a file at quarantine/ ended the sweep in a
NotADirectoryError traceback when it set a damaged part aside, a folder at driver.lease or
sweep.yaml in an IsADirectoryError traceback."""

from __future__ import annotations

import pytest

from mutransfer.cli import main
from mutransfer.errors import UserError
from mutransfer.results.store import Store
from tests.sweeps import write_sweep

# the folders docs/results-format.md lays out that a sweep writes into
STORE_FOLDERS = ("trials", "steps", "running", "checkpoints", "quarantine", "history", "tune")


def _store_with_a_file_at(root, name: str) -> Store:
    store = Store(root)
    store.ensure_writable()
    folder = root / name
    if folder.is_dir():
        folder.rmdir()
    folder.write_text("not a folder\n")
    return store


@pytest.mark.parametrize("name", STORE_FOLDERS)
def test_a_store_folder_taken_by_a_file_is_refused_naming_it(tmp_path, name):
    store = _store_with_a_file_at(tmp_path / "results", name)
    with pytest.raises(UserError, match=f"{name} is a file, not a folder"):
        store.check_is_store()


def test_a_sweep_into_such_a_store_is_one_line_and_exit_2_writing_nothing(tmp_path, capsys):
    root = tmp_path / "results"
    _store_with_a_file_at(root, "trials")
    path = write_sweep(tmp_path, "tiny", {"width": [16], "lr": [0.01]}, storage=root)
    before = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))
    for dry in ([], ["--dry-run"]):
        assert main(["sweep", str(path), "--num-cpus", "1", *dry]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "trials is a file, not a folder" in err, err
    assert sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*")) == before


@pytest.mark.parametrize("name", ["sweep.yaml", "driver.lease"])
def test_a_store_file_taken_by_a_folder_is_refused_naming_it(tmp_path, capsys, name):
    root = tmp_path / "results"
    Store(root).ensure_writable()
    (root / name).mkdir()
    path = write_sweep(tmp_path, "tiny", {"width": [16], "lr": [0.01]}, storage=root)
    assert main(["sweep", str(path), "--num-cpus", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{name} is a folder" in err, err


def test_a_store_with_its_folders_is_accepted(tmp_path):
    store = Store(tmp_path / "results")
    store.ensure_writable()
    for name in STORE_FOLDERS:
        (tmp_path / "results" / name).mkdir(exist_ok=True)
    store.check_is_store()
