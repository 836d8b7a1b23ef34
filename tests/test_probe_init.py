"""The init schemes (Liu & Li, ICLR 2025) on the model the trainer actually builds: run_trial's
own build, at odd widths and d_state values, in sp and mup_ssm; the cost of the autocorr
init in forwards per block; the Δ spread along a zero_real_fraction axis; a zero input."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import mutransfer.train as train
from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.errors import UserError
from mutransfer.init import autocorr
from mutransfer.models.build import build_model
from mutransfer.models.data_init import capture_ssm_input
from mutransfer.models.lm import Block

KAPPA, SPREAD, SEQ_LEN = 0.7, 9.0, 48


def _cfg(arch: str, width: int, d_state: int, param: str = "sp", p: float = 0.0,
         n_layer: int = 2, **model) -> TrialConfig:
    return TrialConfig(
        width=width, param={"name": param},
        model={"arch": arch, "n_layer": n_layer, "d_state": d_state, "base_width": 32,
               "dt_init": {"scheme": "autocorr", "kappa": KAPPA, "spread": SPREAD},
               "zero_real_fraction": p, **model},
        data={"source": "synthetic", "task": "memory"},
        train={"seq_len": SEQ_LEN, "batch_size": 2, "steps": 1, "eval_every": 1,
               "eval_batches": 1, "lr": 1e-6})


def _trained_from(cfg: TrialConfig, monkeypatch) -> tuple[torch.nn.Module, tuple]:
    """The model run_trial builds (a copy taken at build time) and the sample it handed over."""
    seen: list = []

    def spy(config, spec, sample=None):
        model = build_model(config, spec, sample=sample)
        seen.append((copy.deepcopy(model), sample))
        return model

    monkeypatch.setattr(train, "build_model", spy)
    train.run_trial(cfg)
    return seen[0]


def _dt(mixer) -> torch.Tensor:
    if hasattr(mixer, "log_dt"):
        return mixer.dt().detach().double()
    return torch.nn.functional.softplus(mixer.dt_proj.bias.detach().double())


def _zero_real(mixer) -> torch.Tensor:
    return (mixer.A_re == 0) if hasattr(mixer, "A_re") else (mixer.A() == 0)


@pytest.mark.parametrize("arch,width,d_state,param", [
    ("mamba", 33, 1, "sp"), ("mamba", 35, 7, "mup_ssm"), ("mamba", 40, 64, "mup_ssm"),
    ("s4d", 33, 2, "sp"), ("s4d", 35, 6, "mup_ssm"), ("s4d", 40, 128, "mup_ssm")])
def test_the_trainers_model_has_the_asked_zero_real_parts_and_data_timescales(
        arch, width, d_state, param, monkeypatch) -> None:
    model, (inputs, _) = _trained_from(_cfg(arch, width, d_state, param, p=0.3), monkeypatch)
    for i, layer in enumerate(model.layers):
        mixer = layer.mixer
        zero = _zero_real(mixer)
        assert int(zero.sum()) == round(0.3 * zero.numel()), i
        x = capture_ssm_input(model, i, inputs)
        star = autocorr.timescale(autocorr.lambda_max(x), SEQ_LEN, KAPPA)
        lo = max(star / math.sqrt(SPREAD), getattr(mixer, "dt_init_floor", 0.0))
        dt = _dt(mixer)
        assert dt.min() >= lo * (1 - 1e-4) and dt.max() <= star * math.sqrt(SPREAD) * (1 + 1e-4)


def test_each_block_runs_at_most_twice_while_the_autocorr_init_reads_its_input(
        monkeypatch) -> None:
    # each layer's input is the output of the block below as initialised: one forward per
    # block is enough (a full forward up to every layer runs block 0 n_layer times)
    cfg = _cfg("s4d", 32, 4, n_layer=5)
    source = load_data(cfg.data)
    sample = next(source.batches("train", 4, SEQ_LEN, seed=0))
    calls: dict[int, int] = {}
    forward = Block.forward

    def counted(self, x):
        calls[id(self)] = calls.get(id(self), 0) + 1
        return forward(self, x)

    monkeypatch.setattr(Block, "forward", counted)
    model = build_model(cfg, source.spec, sample=sample)
    assert [calls.get(id(block), 0) for block in model.layers] == [2, 2, 2, 2, 1]


@pytest.mark.parametrize("arch", ["s4d", "mamba"])
def test_along_a_zero_real_fraction_axis_the_first_layers_timescales_stay_the_same(
        arch, monkeypatch) -> None:
    # layer 0's input does not depend on any A, so its Δ must not either: p = 0 and p > 0
    # cells of one seed share the Δ spread, and p is the only change there
    first = [_trained_from(_cfg(arch, 32, 4, p=p), monkeypatch)[0].layers[0].mixer
             for p in (0.0, 0.25)]
    assert torch.equal(_dt(first[0]), _dt(first[1]))
    assert int(_zero_real(first[0]).sum()) == 0 and int(_zero_real(first[1]).sum()) > 0


def test_an_all_zero_ssm_input_is_a_user_error_not_a_huge_timescale() -> None:
    # zero inputs reach the first S4D layer as zeros (encoder without bias, RMSNorm of 0):
    # Δ* = κ/√(L·0) is no number; before: Δ ≈ 1e14 in every channel, silently
    cfg = _cfg("s4d", 32, 4)
    zeros = torch.zeros(4, SEQ_LEN, 1)
    with pytest.raises(UserError, match="layer 0 .* zero everywhere"):
        build_model(cfg, load_data(cfg.data).spec, sample=(zeros, zeros))


@pytest.mark.parametrize("d_state,min_separation", [(16, 0.5), (64, 0.1)])
def test_chosen_frequencies_that_cover_the_band_leave_no_mode_repeated(
        d_state, min_separation, monkeypatch) -> None:
    # an exponential memory puts θ = 0 first and then every min_separation up to π; too few
    # Lin values are far enough, and Lin's n = 0 (θ = 0) repeated the chosen DC: every
    # channel had A = -1/2 twice, one mode wasted, the worst conditioning there is
    cfg = TrialConfig(
        width=33, model={"arch": "s4d", "n_layer": 1, "d_state": d_state, "base_width": 32,
                         "imag_init": {"scheme": "memory", "memory": "task",
                                       "min_separation": min_separation}},
        data={"source": "synthetic", "task": "memory", "rho": "exp"},
        train={"seq_len": 256, "batch_size": 1, "steps": 1, "eval_every": 1,
               "eval_batches": 1, "lr": 1e-6})
    mixer = _trained_from(cfg, monkeypatch)[0].layers[0].mixer
    theta = (mixer.A_im * mixer.dt()[:, None]).detach().double()
    assert float(theta[:, 0].abs().max()) < 1e-6  # the chosen DC is there
    gaps = (theta[:, :, None] - theta[:, None, :]).abs()
    gaps = gaps + torch.eye(theta.shape[1], dtype=torch.float64) * 10
    assert float(gaps.min()) > 1e-4
