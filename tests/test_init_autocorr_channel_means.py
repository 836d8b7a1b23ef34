"""dt_init autocorr, `toeplitz` estimate: each SSM channel is centred on its own mean.

A layer's SSM input pools its channels as sequences, and the channels' means differ (the
embedding's columns, SiLU after the conv). Centred on one mean for all, that spread went into
the biased autocovariance, which shrinks it into a triangle: λ_max came out ~0.72 of the pooled
sequences' R on the trainer's own models, and Δ* ~1.2x too large, at every width.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mutransfer import train
from mutransfer.config import TrialConfig
from mutransfer.init import autocorr
from mutransfer.models.data_init import init_sample

SEQ_LEN, KAPPA = 32, 0.7


def dense_per_channel(x: np.ndarray) -> np.ndarray:
    """mean_p(m_p²)·11ᵀ + Toeplitz(ĉ), ĉ of each channel p around its own mean m_p, formed
    entry by entry from the definition: x (channels, n, L)."""
    length = x.shape[-1]
    means = x.mean(axis=(1, 2))
    y = x - means[:, None, None]
    c = np.array([(y[..., : length - k] * y[..., k:]).sum() for k in range(length)]) / y.size
    lag = np.abs(np.subtract.outer(np.arange(length), np.arange(length)))
    return (means**2).mean() + c[lag]


def test_channels_with_their_own_means_give_the_mixture_s_lambda_max() -> None:
    # 64 channels of white noise, each around its own level: R = mean(level²)·11ᵀ + I exactly,
    # λ_max = mean(level²)·L + 1 = 12.0 (one mean for all gave 8.7: about 0.68·mean(level²)·L
    # + 1, the levels' spread shrunk into a triangle)
    gen = torch.Generator().manual_seed(0)
    levels = torch.linspace(-1.0, 1.0, 64, dtype=torch.float64)
    x = levels[:, None, None] + torch.randn(64, 128, SEQ_LEN, generator=gen, dtype=torch.float64)
    exact = float((levels**2).mean()) * SEQ_LEN + 1
    lam = autocorr.lambda_max(x)
    assert lam == pytest.approx(float(np.linalg.eigvalsh(dense_per_channel(x.numpy()))[-1]),
                                rel=1e-6)
    assert lam == pytest.approx(exact, rel=0.06)
    assert autocorr.lambda_max(x, "sample") == pytest.approx(exact, rel=0.06)


def _ssm_inputs(model, arch: str, inputs: torch.Tensor) -> list[np.ndarray]:
    """Each layer's SSM input (batch · channels, L), read by hooks of this test's own."""
    got: dict[int, torch.Tensor] = {}
    hooks = [(layer.mixer if arch == "s4d" else layer.mixer.x_proj_dt).register_forward_pre_hook(
        lambda _m, args, i=i: got.setdefault(i, args[0].detach()))
        for i, layer in enumerate(model.layers)]
    with torch.no_grad():
        model(inputs)
    for h in hooks:
        h.remove()
    return [got[i].double().transpose(1, 2).reshape(-1, SEQ_LEN).numpy()
            for i in range(len(model.layers))]


@pytest.mark.parametrize("arch", ["s4d", "mamba"])
def test_the_trainer_s_timescale_is_that_of_the_pooled_sequences_autocorrelation(arch) -> None:
    # 16 sample sequences x 64 or 128 channels = 1024+ rows of length 32: the sample R = XᵀX/n
    # is then close to the truth, and the stationary estimate must agree with it (before: Δ
    # 14-16% above it in every layer)
    cfg = TrialConfig(width=64, model={"arch": arch, "n_layer": 2, "d_state": 8,
                                       "base_width": 32,
                                       "dt_init": {"scheme": "autocorr", "kappa": KAPPA,
                                                   "spread": 1.0}},
                      data={"source": "stdlib"},
                      train={"seq_len": SEQ_LEN, "batch_size": 4, "seed": 3})
    trial = train._build(cfg)
    inputs, _ = init_sample(cfg, trial.source, SEQ_LEN)
    for i, x in enumerate(_ssm_inputs(trial.model, arch, inputs)):
        lam = float(np.linalg.eigvalsh(x.T @ x / x.shape[0]).max())
        want = KAPPA / math.sqrt(SEQ_LEN * lam)
        mixer = trial.model.layers[i].mixer
        dt = (mixer.dt() if arch == "s4d"
              else torch.nn.functional.softplus(mixer.dt_proj.bias)).detach()
        assert float(dt.min()) == pytest.approx(float(dt.max()))  # spread 1: one Δ
        assert float(dt[0]) == pytest.approx(want, rel=0.05), i
