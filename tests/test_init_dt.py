"""dt_init autocorr: Δ of each layer from the autocorrelation of the sequences entering it,
set at build time from a sample batch."""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.errors import UserError
from mutransfer.init import autocorr
from mutransfer.models.build import build_model
from mutransfer.models.data_init import capture_ssm_input


def _cfg(arch: str, seq_len: int = 64, spread: float = 1.0, **model) -> TrialConfig:
    return TrialConfig(
        width=32, model={"arch": arch, "n_layer": 2, "d_state": 8, "base_width": 32,
                         "dt_init": {"scheme": "autocorr", "kappa": 0.5, "spread": spread},
                         **model},
        data={"source": "synthetic", "task": "memory"},
        train={"seq_len": seq_len, "batch_size": 8})


def _build(cfg: TrialConfig, seed: int = 0):
    source = load_data(cfg.data)
    batch = next(source.batches("train", 16, cfg.train.seq_len, seed=123))
    torch.manual_seed(seed)
    return build_model(cfg, source.spec, sample=batch), batch


def _rule(model, layer: int, inputs: torch.Tensor, kappa: float = 0.5) -> float:
    x = capture_ssm_input(model, layer, inputs)
    return autocorr.timescale(autocorr.lambda_max(x), x.shape[-1], kappa)


def test_s4d_layers_get_the_rule_s_timescale_from_their_own_inputs() -> None:
    model, (inputs, _) = _build(_cfg("s4d"))
    for i, layer in enumerate(model.layers):
        dt = layer.mixer.dt().detach()
        # spread 1: every channel at Δ*, computed from what reaches this layer in the final model
        assert torch.allclose(dt, torch.full_like(dt, _rule(model, i, inputs)), rtol=1e-5)
    assert not torch.allclose(model.layers[0].mixer.dt(), model.layers[1].mixer.dt())


def test_mamba_dt_bias_gets_the_rule_s_timescale() -> None:
    model, (inputs, _) = _build(_cfg("mamba"))
    for i, layer in enumerate(model.layers):
        dt = torch.nn.functional.softplus(layer.mixer.dt_proj.bias.detach())
        expected = max(_rule(model, i, inputs), layer.mixer.dt_init_floor)
        assert torch.allclose(dt, torch.full_like(dt, expected), rtol=1e-4)


def test_spread_is_log_uniform_around_the_timescale() -> None:
    model, (inputs, _) = _build(_cfg("s4d", spread=100.0))
    dt = model.layers[0].mixer.dt().detach().double()
    star = _rule(model, 0, inputs)
    assert dt.min() >= star / 10 * (1 - 1e-5) and dt.max() <= star * 10 * (1 + 1e-5)
    assert dt.max() / dt.min() > 20  # spread over the range, not one value


def test_white_inputs_give_a_timescale_like_inverse_sqrt_length() -> None:
    """The memory task's inputs are white; the first layer's Δ follows 1/√L."""
    short = _build(_cfg("s4d", seq_len=256))[0].layers[0].mixer.dt()[0].item()
    long = _build(_cfg("s4d", seq_len=1024))[0].layers[0].mixer.dt()[0].item()
    assert math.log(short / long) / math.log(4) == pytest.approx(0.5, abs=0.08)


def test_autocorr_without_a_sample_is_a_user_error() -> None:
    cfg = _cfg("s4d")
    with pytest.raises(UserError, match="sample"):
        build_model(cfg, load_data(cfg.data).spec)


def test_without_data_dependent_schemes_the_sample_changes_nothing() -> None:
    cfg = TrialConfig(width=32, model={"arch": "s4d", "n_layer": 1, "d_state": 4,
                                       "base_width": 32},
                      data={"source": "synthetic", "task": "memory"})
    spec = load_data(cfg.data).spec
    sample = torch.randn(2, 16, 1)
    torch.manual_seed(0)
    plain = build_model(cfg, spec)
    torch.manual_seed(0)
    sampled = build_model(cfg, spec, sample=sample)
    for (name, a), (_, b) in zip(plain.named_parameters(), sampled.named_parameters()):
        assert torch.equal(a, b), name
