"""What a depth check says it expects: at one width sp is the others' model, so the width
check's "sp is expected to FAIL" (printed for depth checks too) is not said there."""

from __future__ import annotations

from mutransfer.cli import main

TINY = ["--steps", "2", "--seeds", "0", "1", "--seq-len", "16", "--param", "sp"]


def test_a_depth_check_does_not_expect_sp_to_fail(tmp_path, capsys):
    assert main(["coord-check", "--model", "arch=s4d", "--depths", "1", "2", "--width", "32",
                 "--depth-param", "completep", *TINY, "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "sp is expected to FAIL" not in out
    assert "under a depth parameterization each is expected to PASS" in out


def test_a_width_check_still_expects_sp_to_fail(tmp_path, capsys):
    assert main(["coord-check", "--model", "arch=s4d", "--widths", "32", "64", "--n-layer",
                 "1", *TINY, "--out", str(tmp_path / "w")]) == 0
    assert "sp is expected to FAIL" in capsys.readouterr().out
