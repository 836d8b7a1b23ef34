"""What `mutransfer sweep` says when it is stopped before its trials finish: a grid counts its
cells done of all; a search counts the trials it finished, since its plan holds only the
trials it has chosen so far (on an H200, a transfer search over a 128-cell grid stopped with
none finished said 'interrupted: 116 of 128 done')."""

from __future__ import annotations

from mutransfer.cli import main
from mutransfer.sweep.run import driver
from mutransfer.sweep.run.driver import SweepResult
from tests.sweeps import write_sweep


def stopped(monkeypatch, tmp_path, capsys, search: str, **counts) -> tuple[int, str]:
    result = SweepResult(name="s", storage=str(tmp_path / "s"), search=search, **counts)
    monkeypatch.setattr(driver, "run", lambda *a, **k: result)
    path = write_sweep(tmp_path, "s", {"width": [16, 32], "lr": [0.001, 0.01]})
    rc = main(["sweep", str(path), "--no-analysis"])
    return rc, capsys.readouterr().out


def test_a_stopped_search_counts_the_trials_it_finished(monkeypatch, tmp_path, capsys):
    rc, out = stopped(monkeypatch, tmp_path, capsys, "transfer", planned=128, to_run=12,
                      unfinished=2, remaining=12)
    assert rc == 130
    assert "interrupted: 0 trials finished in this run" in out, out
    assert "116" not in out and "of 128" not in out


def test_a_stopped_search_counts_diverged_and_stopped_trials_as_finished(monkeypatch, tmp_path,
                                                                        capsys):
    rc, out = stopped(monkeypatch, tmp_path, capsys, "transfer", planned=128, to_run=20,
                      complete=3, diverged=1, stopped=1, failed=2, unfinished=4, remaining=9)
    assert rc == 130
    assert "interrupted: 5 trials finished in this run, 2 failed for good" in out, out


def test_a_stopped_grid_counts_its_cells_done_of_all(monkeypatch, tmp_path, capsys):
    rc, out = stopped(monkeypatch, tmp_path, capsys, "grid", planned=6, to_run=6,
                      complete=2, unfinished=1, remaining=4)
    assert rc == 130
    assert "interrupted: 2 of 6 done; run the sweep again to resume" in out, out
