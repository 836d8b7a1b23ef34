"""`mutransfer autocorr` on unusual data: a corpus shorter than a length asked for, a task
that needs longer sequences, sequences that are zero."""

from __future__ import annotations

import math

import pytest

from mutransfer.cli import main
from mutransfer.init import autocorr


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_a_length_the_corpus_cannot_give_is_refused_before_the_table_starts(
        tmp_path, capsys) -> None:
    # 12 train tokens give sequences of 8 but not of 64: before, the table's header and the
    # row of L = 8 were printed, then an error that spoke of seq_len, which this command has not
    (tmp_path / "tiny.txt").write_text("hello world\n")
    config = tmp_path / "data.yaml"
    config.write_text(f"source: text\npath: {tmp_path / 'tiny.txt'}\n")
    assert main(["autocorr", "--data", str(config), "--lengths", "8", "64",
                 "--samples", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(_errors(err)) == 1 and _errors(err)[0].startswith("error: --lengths 64: "), err


def test_a_length_too_short_for_the_copy_task_is_refused_naming_it(tmp_path, capsys) -> None:
    config = tmp_path / "copy.yaml"
    config.write_text("source: synthetic\ntask: copy\n")
    assert main(["autocorr", "--data", str(config), "--lengths", "8", "64"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and _errors(err) == [
        "error: --lengths 8: synthetic copy needs seq_len >= 2 * copy_len + lag = 20, got "
        "seq_len 8"]


def test_zero_sequences_give_an_infinite_timescale_and_no_fitted_exponent(capsys) -> None:
    # before: Δ* 2.5e+14 at L = 16 (κ/√(L·1e-30)) and "lambda_max ~ L^nan"
    assert main(["autocorr", "--data", "constant", "--mean", "0", "--lengths", "2", "16",
                 "--samples", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line.strip()[:1].isdigit()]
    assert rows == [["2", "0", "inf"], ["16", "0", "inf"]]
    assert out[-1].startswith("fitted exponents: none") and "nan" not in "\n".join(out)


@pytest.mark.parametrize("lam,expected", [(0.0, math.inf), (-1e-300, math.inf), (4.0, 0.25)])
def test_the_timescale_of_zero_input_is_infinite(lam, expected) -> None:
    assert autocorr.timescale(lam, 4) == expected
    assert math.isnan(autocorr.timescale(math.nan, 4))


def test_the_size_limit_counts_every_channel_of_layer_0(tmp_path, capsys, monkeypatch) -> None:
    # layer 0 of a mamba at width 32 gives 64 sequences (its channels) per sample: the limit
    # on values a length must count them (before: only L x samples was checked, and a wide
    # model at the default lengths ran out of memory with a traceback)
    import mutransfer.commands.autocorr as command

    monkeypatch.setattr(command, "MAX_VALUES", 4096)
    config = tmp_path / "trial.yaml"
    config.write_text("width: 32\nmodel: {arch: mamba, d_state: 4, base_width: 32}\n"
                      "data: {source: synthetic, task: copy}\n")
    assert main(["autocorr", "--data", str(config), "--lengths", "32", "64",
                 "--samples", "2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and _errors(err) == [
        "error: --lengths 64 x --samples 2 x 64 channels of layer 0: at most 4,096 values a "
        "length (e.g. --samples up to 1)"]
