"""`mutransfer coord-check` and `mutransfer.coord_check` refuse the same settings with the same
line: the command only parses its options, and the Python API checks them (a seed out of
range, a batch no machine holds), naming the options through `name=option`. Each refusal
comes before the corpus loads and before any model trains, and the command writes nothing."""

from __future__ import annotations

import pytest

import mutransfer.coordcheck as cc
from mutransfer import CoordSettings, coord_check
from mutransfer.cli import main
from mutransfer.commands.coord_check import option
from mutransfer.errors import UserError

HUGE_SEED = 2**53 + 1  # 9007199254740993: one past the largest integer a config holds
HUGE_BATCH = 10**12
MEMORY = 16 * 2**30  # the machine the tests pretend to run on: 16 GiB
SMALL = ["--widths", "16", "32", "--param", "sp", "--steps", "1", "--n-layer", "1",
         "--batch-size", "2", "--seq-len", "16"]


@pytest.fixture
def measured(monkeypatch) -> list[str]:
    """What the check got to: the corpus load or the measurement (neither may be reached).
    The checks themselves run as they are; the machine has 16 GiB."""
    reached: list[str] = []

    def stop(what: str):
        def record(*args, **kwargs):
            reached.append(what)
            raise AssertionError(f"{what} reached")
        return record

    monkeypatch.setattr(cc, "load_data", stop("load_data"))
    monkeypatch.setattr(cc, "run_coord_check", stop("run_coord_check"))
    monkeypatch.setattr(cc, "memory_bytes", lambda: MEMORY)
    return reached


def _cli_refusal(capsys, argv: list[str]) -> str:
    """The one error line of `mutransfer coord-check ARGV` (exit code 2, no traceback)."""
    rc = main(["coord-check", *argv])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert out == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0].removeprefix("error: ")


def _api_refusal(settings: CoordSettings, **kwargs) -> str:
    with pytest.raises(UserError) as info:
        coord_check(settings, **kwargs)
    assert "\n" not in str(info.value)
    return str(info.value)


SEED_LINE = f"--seeds {HUGE_SEED}: out of range for a seed (at most 2**53 in size)"
BATCH_LINE = f"--batch-size {HUGE_BATCH} x --seq-len 16: one batch's token ids alone take"


@pytest.mark.parametrize("options,settings,line", [
    (["--seeds", "0", str(HUGE_SEED)], {"seeds": [0, HUGE_SEED]}, SEED_LINE),
    (["--seeds", "0", "--batch-size", str(HUGE_BATCH)],
     {"seeds": [0], "batch_size": HUGE_BATCH}, BATCH_LINE),
], ids=["seed out of range", "batch beyond memory"])
def test_the_command_and_the_api_refuse_with_the_same_line_before_measuring(
        tmp_path, capsys, measured, options, settings, line):
    """Before: the command checked both itself, and the API's seed line did not say which
    seed ('--seeds: out of range ...')."""
    out = tmp_path / "cc"
    cli = _cli_refusal(capsys, [*SMALL, *options, "--out", str(out)])
    assert cli.startswith(line), cli
    assert not out.exists() and list(tmp_path.iterdir()) == []
    given = CoordSettings(**{"widths": [16, 32], "params": ["sp"], "steps": 1, "n_layer": 1,
                             "batch_size": 2, "seq_len": 16, **settings})
    assert _api_refusal(given, name=option) == cli
    assert measured == []


def test_the_api_names_the_seed_out_of_range_in_its_own_words(measured):
    line = _api_refusal(CoordSettings(widths=[16, 32], params=["sp"], steps=1,
                                      seeds=[0, -HUGE_SEED]))
    assert line == f"seeds {-HUGE_SEED}: out of range for a seed (at most 2**53 in size)"
    assert measured == []


def test_the_largest_seed_a_config_holds_is_taken(measured):
    """2**53 itself is in range: the check goes on to the corpus (where the fixture stops)."""
    with pytest.raises(AssertionError, match="load_data reached"):
        coord_check(CoordSettings(widths=[16, 32], params=["sp"], steps=1, n_layer=1,
                                  d_state=4, batch_size=2, seq_len=16, seeds=[2**53]))
    assert measured == ["load_data"]


def test_an_out_folder_the_command_cannot_write_is_refused_before_the_settings(
        tmp_path, capsys, measured):
    """The output folder is checked first: a bad --out and a bad seed name the folder."""
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    line = _cli_refusal(capsys, [*SMALL, "--seeds", str(HUGE_SEED),
                                 "--out", str(blocker / "cc")])
    assert "is a file" in line and "--seeds" not in line
    assert measured == []
