"""Where `mutransfer analyze` and `plot` write: the folder checked is the folder written, with
`~` and file:// URIs as the store itself takes them, and never inside a store's tables."""

import os
from pathlib import Path

import pytest

from mutransfer.cli import main
from mutransfer.results.store import MARKER
from tests.sweeps import planted_results

# what `analyze` writes: each table as .parquet and .csv, and analysis.md
ANALYSIS_MD = "analysis.md"


def files_under(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


def one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.fixture
def home_and_cwd(tmp_path, monkeypatch):
    """A home folder and a separate current folder, both empty, inside tmp_path."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    return home, cwd


def test_an_out_starting_with_a_tilde_puts_every_file_in_the_home_folder(tmp_path, capsys,
                                                                         home_and_cwd):
    """Before: `--out ~/a` was checked as the home folder's a/, the tables were written
    there, and analysis.md into a new folder named `~` in the current folder."""
    home, cwd = home_and_cwd
    root = planted_results(tmp_path / "store", [64, 128])
    assert main(["analyze", str(root), "--out", "~/a"]) == 0
    written = files_under(home / "a")
    assert Path(ANALYSIS_MD) in written and Path("lr_opt.parquet") in written
    assert files_under(cwd) == []


def test_a_results_folder_given_with_a_tilde_gets_its_analysis_beside_its_tables(
        capsys, home_and_cwd):
    """Before: the store was read from the home folder, then a traceback on writing its
    analysis into a new folder `~/store/analysis` of the current folder."""
    home, cwd = home_and_cwd
    planted_results(home / "store", [64, 128])
    assert main(["analyze", "~/store"]) == 0
    assert Path(ANALYSIS_MD) in files_under(home / "store" / "analysis")
    assert files_under(cwd) == []


def test_a_file_uri_out_is_written_as_the_folder_it_names(tmp_path, capsys, home_and_cwd):
    """Before: a folder `file:` in the current folder, the Parquet tables in the URI's
    folder, then a traceback on the first CSV."""
    _, cwd = home_and_cwd
    root = planted_results(tmp_path / "store", [64, 128])
    out = tmp_path / "report"
    assert main(["analyze", str(root), "--out", out.as_uri()]) == 0
    assert Path(ANALYSIS_MD) in files_under(out)
    assert files_under(cwd) == []


def test_an_out_in_an_object_store_is_refused_before_the_analysis(tmp_path, capsys,
                                                                  home_and_cwd):
    _, cwd = home_and_cwd
    root = planted_results(tmp_path / "store", [64, 128])
    before = files_under(root)
    assert main(["analyze", str(root), "--out", "s3://bucket/analysis"]) == 2
    assert "--out s3://bucket/analysis: not a local folder" in one_error_line(capsys)
    assert files_under(root) == before and files_under(cwd) == []


@pytest.mark.parametrize("out_as_uri", [False, True], ids=["out path", "out file URI"])
def test_a_store_named_by_a_file_uri_still_keeps_the_analysis_out_of_its_tables(
        tmp_path, capsys, out_as_uri):
    """Before: a file:// results folder skipped the check; its analysis tables were written
    into trials/, and read as damaged parts of the sweep from then on."""
    root = planted_results(tmp_path / "store", [64, 128])
    before = files_under(root)
    out = root / "trials"
    assert main(["analyze", root.as_uri(), "--out", out.as_uri() if out_as_uri
                 else str(out)]) == 2
    assert "inside the results folder's trials/" in one_error_line(capsys)
    assert files_under(root) == before


@pytest.mark.parametrize("command", ["analyze", "plot"])
def test_an_out_inside_another_stores_tables_is_refused(tmp_path, capsys, command):
    """The analysis of one store written into another store's steps/ (before: accepted)."""
    root = planted_results(tmp_path / "store", [64, 128])
    other = planted_results(tmp_path / "other", [64])
    (other / MARKER).write_text('{"format": 1}\n')
    before = files_under(other)
    assert main([command, str(root), "--out", os.path.join(other, "trials", "x")]) == 2
    assert f"inside the results folder's trials/ (of {other})" in one_error_line(capsys)
    assert files_under(other) == before
