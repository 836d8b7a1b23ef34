"""`mutransfer validate A B C` checks every file it is given: each refused one gets its line
on stderr, the others their `ok` line, and the exit code is 2 when any was refused (before:
the first bad file ended the command, and the files after it were never looked at)."""

from __future__ import annotations

from mutransfer.cli import main
from tests.sweeps import write_sweep


def test_every_file_is_checked_and_each_bad_one_gets_its_own_line(tmp_path, capsys):
    good = write_sweep(tmp_path, "good", {"lr": [1e-3]})
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\naxes: {width: [16]}\nbogus: 1\n")
    worse = tmp_path / "worse.yaml"
    worse.write_text("name: [not, a, name]\n")
    assert main(["validate", str(bad), str(good), str(worse), "--no-data"]) == 2
    out, err = capsys.readouterr()
    assert f"{good}: ok, 1 cells" in out
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"error: {bad}") and "bogus" in lines[0]
    assert lines[1].startswith(f"error: {worse}")
    assert "Traceback" not in err


def test_every_file_good_exits_0(tmp_path, capsys):
    files = [write_sweep(tmp_path, name, {"lr": [1e-3]}) for name in ("a", "b")]
    assert main(["validate", *map(str, files), "--no-data"]) == 0
    assert capsys.readouterr().err == ""


def test_a_gpu_it_cannot_price_is_refused_before_the_file_is_said_ok(tmp_path, capsys):
    """Before: 'FILE: ok, 1 cells' on stdout, then the --gpu refusal and exit 2."""
    good = write_sweep(tmp_path, "good", {"lr": [1e-3]})
    assert main(["validate", str(good), "--no-data", "--gpu", "a100"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--gpu a100" in err and err.count("\n") == 1
