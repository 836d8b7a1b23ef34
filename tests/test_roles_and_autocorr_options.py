"""`mutransfer roles` on a config whose sections are malformed, and `mutransfer autocorr`'s
options of one kind of data given with another: one line, exit 2, never ignored."""

from __future__ import annotations

import pytest

from mutransfer.cli import main


def one_error_line(capsys, rc: int) -> str:
    out, err = capsys.readouterr()
    assert rc == 2 and out == "", err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("text,needle", [
    ("model: 3", "model: Input should be a valid dictionary"),
    ("model: [1]", "model: Input should be a valid dictionary"),
    ("model: {base_width: abc}", "model.base_width: Input should be a valid integer"),
    ("model: {base_width: null}", "model.base_width: Input should be a valid integer"),
    ("model: {base_width: .inf}", "model.base_width: inf is not a finite number"),
    ("model: {base_width: 1.5}", "model.base_width: Input should be a valid integer"),
    ("data: 5", "data: Input should be a valid dictionary"),
    ("model: {base_width: 16}\ndata: [a]", "data: Input should be a valid dictionary"),
    ("param: 3", "param: Input should be a valid dictionary"),
], ids=["model int", "model list", "base_width text", "base_width null", "base_width inf",
        "base_width fraction", "data int", "data list", "param int"])
def test_roles_names_a_malformed_section_in_one_line(tmp_path, capsys, text, needle):
    """Before: a TypeError, ValueError or OverflowError traceback (dict(3), int('abc'),
    int(inf)), and `base_width: 1.5` refused as 'width: ... greater than or equal to 8'."""
    path = tmp_path / "config.yaml"
    path.write_text(text + "\n")
    assert needle in one_error_line(capsys, main(["roles", str(path)]))


@pytest.mark.parametrize("argv,needle", [
    (["--rho", "0.5"], "--rho: only for --data ar1, not --data white"),
    (["--data", "constant", "--rho", "0.5"], "--rho: only for --data ar1"),
    (["--data", "ar1", "--mean", "2"], "--mean: only for --data constant, not --data ar1"),
    (["--data", "white", "--noise", "0.1"], "--noise: only for --data constant"),
    (["--data", "white", "--input", "layer0"], "--input layer0: only for a data source"),
    (["--data", "ar1", "--input", "raw"], "--input raw: only for a data source"),
    (["--data", ""], "--data '': give white, ar1, constant, stdlib or a YAML file"),
], ids=["rho white", "rho constant", "mean ar1", "noise white", "input layer0 white",
        "input raw ar1", "data empty"])
def test_autocorr_refuses_an_option_its_data_does_not_read(capsys, argv, needle):
    """Before: the option was ignored, and the table printed (exit 0) was another's than
    asked for: `--data white --rho 0.5` white noise's, `--data ar1 --input layer0` the raw
    AR(1)'s."""
    rc = main(["autocorr", *argv, "--lengths", "8", "16", "--samples", "2"])
    assert needle in one_error_line(capsys, rc)


def test_autocorr_takes_each_signals_own_options(capsys):
    for argv in (["--data", "ar1", "--rho", "0.5"],
                 ["--data", "constant", "--mean", "2", "--noise", "0.1"]):
        assert main(["autocorr", *argv, "--lengths", "8", "16", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "AR(1), rho 0.5:" in out and "constant 2 + 0.1 N(0, 1):" in out
