"""`mutransfer autocorr --data FILE` takes a trial config or a data config; a sweep file or a
check file given there is named as such, in the words `mutransfer train` uses, before any data
loads (before: "name: Extra inputs are not permitted (and 2 more)")."""

from __future__ import annotations

from pathlib import Path

import pytest

from mutransfer.cli import main

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "sweeps" / "quickstart.yaml"
CHECK = ROOT / "examples" / "tiny_gpt_check.yaml"


def one_error_line(capsys, rc: int) -> str:
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", (rc, out)
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err.removeprefix("error: ").strip()


@pytest.fixture
def no_data_loads(monkeypatch):
    monkeypatch.setattr("mutransfer.data.load_data", lambda *a, **k: pytest.fail("data read"))


def test_autocorr_names_a_sweep_file_and_says_to_run_it_with_sweep(capsys, no_data_loads):
    line = one_error_line(capsys, main(["autocorr", "--data", str(SWEEP)]))
    assert line == (f"{SWEEP} is a sweep file (it has name, axes, resources), not a trial "
                    f"config: run it with `mutransfer sweep {SWEEP}`, or give `mutransfer "
                    f"autocorr --data` a trial config or a data config (e.g. "
                    f"configs/train.yaml)")


def test_autocorr_names_a_check_file_and_says_to_run_it_with_check(capsys, no_data_loads):
    line = one_error_line(capsys, main(["autocorr", "--data", str(CHECK)]))
    assert line.startswith(f"{CHECK} is a check file (it has check), not a trial config: "
                           f"run it with `mutransfer check {CHECK}`")


def test_train_and_autocorr_refuse_a_sweep_file_in_the_same_words(capsys, no_data_loads):
    """One wording for both commands: only what to give instead differs."""
    train = one_error_line(capsys, main(["train", str(SWEEP)]))
    autocorr = one_error_line(capsys, main(["autocorr", "--data", str(SWEEP)]))
    same = f"is a sweep file (it has name, axes, resources), not a trial config: run it with " \
           f"`mutransfer sweep {SWEEP}`, or give "
    assert same in train and same in autocorr

