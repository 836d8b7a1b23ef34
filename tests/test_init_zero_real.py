"""Zero real parts: exact zeros on a random fraction p of the eigenvalues, trainable, and with
Δ from the autocorrelation rule an output size at init that does not grow with L."""

from __future__ import annotations

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.init import autocorr, signals
from mutransfer.models.build import build_model
from mutransfer.models.s4d import S4DMixer
from mutransfer.ops.fft_conv import fft_conv

LENGTHS = (256, 1024, 4096)


def output_power(kind: str, length: int, dt_rule: bool) -> float:
    """Mean of y_L² (over sequences and channels) of an S4D-Lin layer with Re(A) = 0.

    The layer (its C, and the per-channel spread of Δ) is the same at every L; Δ is either
    the rule's Δ* = 1/√(L·λ_max) spread log-uniformly ×/÷ √10, or 0.01 everywhere.
    """
    torch.manual_seed(0)
    channels, batch = 64, 16
    mixer = S4DMixer(channels, channels, d_state=16)
    with torch.no_grad():
        mixer.A_re.zero_()
    x = signals.make(kind, batch * channels, length, rho=0.99, seed=length).float()
    if dt_rule:
        dt_star = autocorr.timescale(autocorr.lambda_max(x), length)
        spread = torch.linspace(-0.5, 0.5, channels)
        mixer.reset_dt(dt_star * 10.0 ** spread)
    else:
        mixer.reset_dt(torch.full((channels,), 0.01))
    u = x.reshape(batch, channels, length)
    with torch.no_grad():
        y = fft_conv(u, mixer.kernel(length))
    return float(y[..., -1].pow(2).mean())


@pytest.mark.parametrize("kind", ["white", "ar1", "constant"])
def test_output_stays_bounded_across_lengths_with_the_rule_and_grows_without(kind) -> None:
    ruled = [output_power(kind, n, dt_rule=True) for n in LENGTHS]
    fixed = [output_power(kind, n, dt_rule=False) for n in LENGTHS]
    assert max(ruled) / min(ruled) < 2, ruled
    assert fixed[-1] / fixed[0] > 4 and fixed[-1] > fixed[1] > fixed[0], fixed


def _cfg(arch: str, p: float, **model) -> TrialConfig:
    return TrialConfig(width=32, model={"arch": arch, "n_layer": 2, "d_state": 8,
                                        "base_width": 32, "zero_real_fraction": p, **model},
                       data={"source": "synthetic", "task": "memory"},
                       train={"seq_len": 32, "batch_size": 4, "lr": 1e-2})


def test_s4d_zero_real_parts_are_exact_random_and_of_the_asked_fraction() -> None:
    torch.manual_seed(0)
    cfg = _cfg("s4d", 0.25)
    model = build_model(cfg, load_data(cfg.data).spec)
    masks = []
    for layer in model.layers:
        re = layer.mixer.A_re.detach()
        zero = re == 0
        assert int(zero.sum()) == round(0.25 * re.numel())  # 32 channels × 4 modes -> 32
        assert torch.equal(re[~zero], torch.full_like(re[~zero], -0.5))
        masks.append(zero)
    assert not torch.equal(masks[0], masks[1])  # drawn per layer
    assert masks[0].any(dim=1).sum() > 8  # spread over channels, not a block


def test_s4d_zero_real_parts_train_freely() -> None:
    torch.manual_seed(0)
    cfg = _cfg("s4d", 0.5)
    source = load_data(cfg.data)
    model = build_model(cfg, source.spec)
    mixer = model.layers[0].mixer
    zero = mixer.A_re.detach() == 0
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = next(source.batches("train", 4, 32, seed=0))
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    moved = mixer.A_re.detach()[zero] != 0
    assert moved.float().mean() > 0.9  # Adam moves every entry with a gradient by ~lr


def test_mamba_zero_real_parts_set_a_to_zero_on_the_fraction() -> None:
    torch.manual_seed(0)
    cfg = _cfg("mamba", 0.1)
    model = build_model(cfg, load_data(cfg.data).spec)
    for layer in model.layers:
        a = layer.mixer.A().detach()
        assert int((a == 0).sum()) == round(0.1 * a.numel())  # d_inner 64 × d_state 8
        assert int(layer.mixer.A_zero.sum()) == round(0.1 * a.numel())
    x, _ = next(load_data(cfg.data).batches("train", 2, 32, seed=0))
    assert torch.isfinite(model(x)).all()


def test_zero_fraction_changes_nothing() -> None:
    cfg = _cfg("mamba", 0.0)
    torch.manual_seed(0)
    model = build_model(cfg, load_data(cfg.data).spec)
    assert not model.layers[0].mixer.A_zero.any()
