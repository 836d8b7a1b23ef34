"""Where `mutransfer check` and `mutransfer coord-check` write, as `analyze` and `plot` do: never
inside a results store's tables (trials/, steps/, running/ of any store, one made before the
marker too), `~` expanded once for every file, a file:// URI as its local path. A refusal comes
before any measurement or trial, in one line, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import mutransfer.coordcheck as cc
from mutransfer.cli import main
from mutransfer.commands.check_plan import checked
from mutransfer.results.store import MARKER

CHECK_FILE = str(Path(__file__).resolve().parents[1] / "examples" / "tiny_gpt_check.yaml")
SMALL = ["--widths", "8", "16", "--param", "sp", "--steps", "1", "--seeds", "0", "1",
         "--n-layer", "1", "--batch-size", "1", "--seq-len", "8"]


def files_under(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.fixture
def stores(tmp_path) -> tuple[Path, Path]:
    """A results store with its marker, and one made before the marker (trials/ and steps/
    alone), each with its table folders and nothing in them."""
    new, old = tmp_path / "new", tmp_path / "old"
    for folder in ("trials", "steps", "running"):
        (new / folder).mkdir(parents=True)
    (new / MARKER).write_text("{}")
    for folder in ("trials", "steps"):
        (old / folder).mkdir(parents=True)
    return new, old


@pytest.fixture
def nothing_measured(monkeypatch):
    """The coordinate check's corpus load fails the test: a refusal must come before it."""
    def reached(*args, **kwargs):
        raise AssertionError("the coordinate check loaded its corpus")
    monkeypatch.setattr(cc, "load_data", reached)


@pytest.mark.parametrize("store, inside", [("new", "trials/x"), ("new", "running"),
                                           ("old", "steps/x"), ("old", "trials")])
def test_coord_check_refuses_an_out_inside_a_stores_tables_before_measuring(
        tmp_path, stores, capsys, nothing_measured, store, inside):
    """Before: coord.parquet, slopes.parquet and verdicts.parquet went into trials/x, each
    read as a row of the sweep at every later read of the store."""
    out = tmp_path / store / inside
    assert main(["coord-check", *SMALL, "--out", str(out)]) == 2
    assert f"inside the results folder's {inside.split('/')[0]}/" in one_error_line(capsys)
    assert files_under(tmp_path / store) == ([Path(MARKER)] if store == "new" else [])


def test_coord_check_refuses_an_out_in_a_shared_store_before_measuring(
        tmp_path, monkeypatch, capsys, nothing_measured):
    """Before: `--out s3://b/x` was measured, then written into a folder ./s3:/b/x."""
    monkeypatch.chdir(tmp_path)
    assert main(["coord-check", *SMALL, "--out", "s3://b/x"]) == 2
    assert "s3://b/x: not a local folder" in one_error_line(capsys)
    assert files_under(tmp_path) == []


@pytest.mark.slow
def test_coord_check_writes_a_file_uri_out_into_its_local_path(tmp_path, monkeypatch, capsys):
    """Before: `--out file:///x` made a folder ./file:/x, measured, then ended in a traceback
    writing the first table. Its last line names every file it wrote (before: the first and
    the last, leaving out slopes.parquet and verdicts.parquet)."""
    cwd, target = tmp_path / "cwd", tmp_path / "target"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["coord-check", *SMALL, "--out", target.as_uri()]) == 0
    written = files_under(target)
    assert Path("verdicts.parquet") in written
    assert files_under(cwd) == []
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert all(str(target / f) in last for f in written), last


@pytest.mark.parametrize("store, inside", [("new", "steps/x"), ("old", "trials/x"),
                                           ("old", "steps")])
def test_check_refuses_an_out_inside_a_stores_tables_before_any_trial(
        tmp_path, stores, capsys, monkeypatch, store, inside):
    """Before: an --out inside the tables of a store made before the marker was taken, and
    the check wrote coord.parquet, params.parquet and its sweep there."""
    monkeypatch.setattr("mutransfer.data.load_data", lambda *a, **k: pytest.fail("data read"))
    out = tmp_path / store / inside
    assert main(["check", CHECK_FILE, "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --out {out}: ") and "inside the results" in line
    assert files_under(tmp_path / store) == ([Path(MARKER)] if store == "new" else [])


def test_checks_out_with_a_tilde_holds_its_own_files_and_its_sweep_in_the_home_folder(
        tmp_path, monkeypatch):
    """Before: `--out ~/x` put coord.parquet, verdict.json and report.html into ./~/x, and the
    transfer stage's sweep (whose store expands `~`) into $HOME/x/sweep."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    c = checked(CHECK_FILE, "~/x")
    assert c.out == home / "x"
    assert c.spec.sweep()["storage"] == str(home / "x" / "sweep")
