"""λ_max of the autocorrelation matrix by power iteration, and the timescale rule
Δ* = κ/√(L·λ_max): exact against a dense eigensolver, and with the right exponents in L."""

from __future__ import annotations

import pytest
import torch

from mutransfer.cli import main
from mutransfer.init import autocorr, signals

LENGTHS = [256, 1024, 4096]


def dense_stationary(x: torch.Tensor) -> torch.Tensor:
    """m² 11ᵀ + Toeplitz(ĉ), formed entry by entry from its definition."""
    m = x.mean()
    xc = x - m
    n, length = x.shape
    c = torch.stack([(xc[:, : length - k] * xc[:, k:]).sum() for k in range(length)])
    c = c / (n * length)
    lag = (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs()
    return m * m * torch.ones(length, length, dtype=x.dtype) + c[lag]


@pytest.mark.parametrize("n", [300, 20])  # more and fewer sequences than positions
def test_sample_estimator_matches_eigvalsh(n: int) -> None:
    x = signals.ar1(n, 48, 0.8, torch.Generator().manual_seed(1)) + 0.3
    exact = torch.linalg.eigvalsh(x.T @ x / n)[-1]
    assert autocorr.lambda_max(x, "sample") == pytest.approx(float(exact), rel=0.01)


@pytest.mark.parametrize("kind", ["white", "ar1", "constant"])
def test_stationary_estimator_matches_eigvalsh_of_its_matrix(kind: str) -> None:
    x = signals.make(kind, 16, 64, rho=0.9, noise=0.5, seed=2)
    exact = torch.linalg.eigvalsh(dense_stationary(x))[-1]
    assert autocorr.lambda_max(x, "toeplitz") == pytest.approx(float(exact), rel=0.01)


def test_the_two_estimators_agree_with_many_sequences() -> None:
    """With n ≫ L ≫ the correlation length both estimate the same R: AR(1) ρ = 0.9 (λ_max
    tends to 1/(1-ρ)² = 100 as L grows)."""
    x = signals.ar1(5000, 256, 0.9, torch.Generator().manual_seed(3))
    sample, stationary = autocorr.lambda_max(x, "sample"), autocorr.lambda_max(x)
    assert stationary == pytest.approx(sample, rel=0.05)
    assert 85 < stationary < 100


def test_sample_estimator_is_biased_with_few_sequences() -> None:
    """Why toeplitz is the default: 32 white sequences of length 1024 (true λ_max = 1)."""
    x = signals.white(32, 1024, torch.Generator().manual_seed(4))
    assert autocorr.lambda_max(x, "sample") > 10
    assert autocorr.lambda_max(x, "toeplitz") < 2


def _exponent(kind: str, **kw) -> float:
    dts = []
    for length in LENGTHS:
        lam = autocorr.lambda_max(signals.make(kind, 64, length, seed=length, **kw))
        dts.append(autocorr.timescale(lam, length))
    return autocorr.fit_exponent(LENGTHS, dts)


def test_white_noise_timescale_scales_as_inverse_sqrt_length() -> None:
    assert _exponent("white") == pytest.approx(-0.5, abs=0.05)


def test_constant_mean_timescale_scales_as_inverse_length() -> None:
    assert _exponent("constant", mean=1.0, noise=1.0) == pytest.approx(-1.0, abs=0.05)


def test_timescale_and_spread() -> None:
    assert autocorr.timescale(4.0, 100, kappa=2.0) == pytest.approx(0.1)
    dt = autocorr.spread_dt(0.01, 100.0, 20000, torch.Generator().manual_seed(0))
    assert dt.min() >= 0.001 * (1 - 1e-6) and dt.max() <= 0.1 * (1 + 1e-6)
    assert torch.log(dt.double()).mean().exp() == pytest.approx(0.01, rel=0.05)
    assert torch.equal(autocorr.spread_dt(0.01, 1.0, 3), torch.full((3,), 0.01))


def test_cli_prints_lambda_and_timescale_against_length(capsys) -> None:
    assert main(["autocorr", "--data", "constant", "--lengths", "128", "512",
                 "--samples", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["128", "512"]
    assert [float(r[1]) for r in rows] == pytest.approx([128.0, 512.0], rel=1e-3)
    assert [float(r[2]) for r in rows] == pytest.approx([1 / 128, 1 / 512], rel=1e-3)
    assert "delta* ~ L^-1.000" in out[-1]


def test_cli_reads_a_data_config(tmp_path, capsys) -> None:
    path = tmp_path / "data.yaml"
    path.write_text("source: synthetic\ntask: memory\n")
    assert main(["autocorr", "--data", str(path), "--lengths", "64", "256",
                 "--samples", "32"]) == 0
    out = capsys.readouterr().out
    assert "raw inputs" in out  # the memory task's inputs are white noise
    exponent = float(out.split("delta* ~ L^")[1].split()[0])
    assert exponent == pytest.approx(-0.5, abs=0.1)


def test_cli_rejects_a_bad_config(tmp_path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data: {source: synthetic, rho: cubic}\n")
    assert main(["autocorr", "--data", str(path)]) == 2
    assert "rho" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["--data", "ar1", "--rho", "1.5"], "--rho 1.5"),  # was a math domain error traceback
    (["--data", "ar1", "--rho", "nan"], "--rho nan"),
    (["--kappa", "0"], "--kappa 0"),
    (["--kappa", "nan"], "--kappa nan"),  # was a table of nan
    (["--data", "constant", "--noise", "-1"], "--noise -1"),
    (["--lengths", "100000000000"], "--lengths 100000000000 x --samples 64"),  # was a MemoryError
])
def test_cli_refuses_an_option_out_of_its_range_in_one_line(capsys, argv, needle) -> None:
    assert main(["autocorr", "--lengths", "8", "16", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"error: {needle}:"), err


def test_the_stationary_estimate_transforms_the_rows_a_block_at_a_time(monkeypatch) -> None:
    """The model's SSM input at width 4096 and L 2048 is 131,072 rows: transformed at once,
    their float64 copy and spectra took ~13 GiB. No FFT sees more than a block of rows."""
    monkeypatch.setattr(autocorr, "BLOCK_ENTRIES", 64 * 40, raising=False)
    x = signals.ar1(1000, 64, 0.8, torch.Generator().manual_seed(5)) + 0.2
    seen, rfft = [], torch.fft.rfft
    monkeypatch.setattr(torch.fft, "rfft", lambda t, *a, **kw: seen.append(t.shape) or
                        rfft(t, *a, **kw))
    autocorr.stationary_operator(x)
    rows = [s[0] for s in seen if len(s) == 2]
    assert rows and max(rows) <= 40 and sum(rows) == 1000


def test_blocks_change_the_estimate_only_in_the_order_of_a_sum(monkeypatch) -> None:
    x = signals.ar1(1000, 64, 0.8, torch.Generator().manual_seed(5)).reshape(10, 100, 64) + 0.2
    whole = autocorr.lambda_max(x)
    monkeypatch.setattr(autocorr, "BLOCK_ENTRIES", 64 * 7)  # 143 blocks, the last one short
    assert autocorr.lambda_max(x) == pytest.approx(whole, rel=1e-12)
    exact = torch.linalg.eigvalsh(dense_stationary(x.reshape(-1, 64).double()))[-1]
    assert whole == pytest.approx(float(exact), rel=0.01)
