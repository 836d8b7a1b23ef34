"""dt_init autocorr on a signal whose autocorrelation is known in closed form: AR(1),
x_t = φ x_{t-1} + e_t (unit innovations), R_st = φ^|s-t| / (1 - φ²), correlation time
-1/ln φ. Δ* = κ/√(L·λ_max(R)) must follow the exact λ_max of that Toeplitz matrix (toward
1/(1-φ)² as L grows: the longer the correlation, the smaller Δ), and white noise (φ = 0)
must give Δ* = κ/√L."""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.init import signals
from mutransfer.models.data_init import autocorr_dt
from mutransfer.ssm_config import DtInit


def exact_lambda_max(phi: float, length: int) -> float:
    lag = (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs()
    r = phi ** lag.double() / (1 - phi * phi)
    return float(torch.linalg.eigvalsh(r)[-1])


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.8])
def test_autocorr_dt_of_ar1_follows_its_exact_lambda_max(phi: float) -> None:
    length, kappa = 128, 0.5
    x = signals.make("ar1", 512, length, rho=phi, seed=3)  # one process, 512 sequences
    opts = DtInit(scheme="autocorr", kappa=kappa, spread=1.0)
    dt = autocorr_dt(x.unsqueeze(0), opts, channels=4)
    want = kappa / math.sqrt(length * exact_lambda_max(phi, length))
    assert torch.allclose(dt, torch.full((4,), want, dtype=dt.dtype), rtol=0.08), (dt, want)
    if phi > 0:  # correlation time -1/ln φ: 1.4 steps at 0.5, 4.5 at 0.8; Δ shrinks with it
        assert want < kappa / math.sqrt(length) * (1 - phi) * 1.5


def test_autocorr_dt_spreads_log_uniformly_around_dt_star() -> None:
    torch.manual_seed(0)
    x = signals.make("white", 256, 64, seed=1)
    dt = autocorr_dt(x.unsqueeze(0), DtInit(scheme="autocorr", spread=100.0), channels=4000)
    center = 1 / math.sqrt(64)  # white: λ_max = 1
    ratio = torch.log10(dt.double() / center)
    assert ratio.min() >= -1 - 0.1 and ratio.max() <= 1 + 0.1  # [Δ*/10, 10Δ*], ±estimation
    assert abs(float(ratio.mean())) < 0.1 and abs(float(ratio.std()) - 2 / math.sqrt(12)) < 0.05
