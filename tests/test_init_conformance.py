"""The model as the trainer builds it starts where the reference Mamba starts.

Every model here comes from `build_model(TrialConfig, spec)`, the call `run_trial` makes, so
whatever the parameterization and the init schemes do after the modules are constructed is
included. The expected values are written out from the reference implementation,
state-spaces/mamba (read at commit e9594ce):

- `mamba_ssm/modules/mamba_simple.py`, `Mamba.__init__`:
  in_proj, x_proj, out_proj are `nn.Linear` (PyTorch default: kaiming_uniform with a=√5, i.e.
  U(±1/√fan_in)); conv1d is a depthwise `nn.Conv1d` with PyTorch's default init (weight and bias
  U(±1/√fan_in), fan_in = (in_channels / groups) · kernel = d_conv); dt_proj.weight
  U(±dt_rank^-0.5 · dt_scale); dt_proj.bias = softplus⁻¹(Δ), Δ = exp(U·(ln dt_max − ln dt_min)
  + ln dt_min) clamped at dt_init_floor, marked `_no_reinit`; A_log = log(1..d_state) per
  channel; D = 1.
- `mamba_ssm/models/mixer_seq_simple.py`, `_init_weights` (applied by MixerModel and
  MambaLMHeadModel): Linear biases zeroed unless `_no_reinit` (so dt_proj.bias survives),
  embedding N(0, 0.02), out_proj re-drawn kaiming-uniform then divided by √n_layer (one
  residual per layer without an MLP); conv1d untouched; norms (RMSNorm) weight 1; an untied
  lm_head an `nn.Linear` default, U(±1/√d_model).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.models.layers import ScaledLinear
from mutransfer.param.config import PARAMETERIZATIONS
from tests.conftest import BYTES

BASE, N_LAYER, D_STATE, D_CONV = 64, 2, 16, 4
DT_MIN, DT_MAX = 1e-3, 1e-1
WIDTHS = (128, 256)


def built(param: str, width: int, *, seed: int = 0, **model) -> torch.nn.Module:
    cfg = TrialConfig(width=width, param={"name": param},
                      model={"base_width": BASE, "n_layer": N_LAYER, "d_state": D_STATE,
                             "d_conv": D_CONV, **model})
    torch.manual_seed(seed)
    return build_model(cfg, BYTES)


def ks_uniform(u: torch.Tensor) -> float:
    """Kolmogorov–Smirnov distance of samples in [0, 1] from U(0, 1)."""
    u = u.double().sort().values
    n = len(u)
    ranks = torch.arange(1, n + 1, dtype=torch.float64)
    return max((ranks / n - u).max().item(), (u - (ranks - 1) / n).max().item())


def assert_uniform(t: torch.Tensor, bound: float, name: str) -> None:
    """t ~ U(±bound): inside the bound, nearly reaching it, std bound/√3 within 5 s.e."""
    t = t.detach().double().flatten()
    n = t.numel()
    assert t.abs().max().item() <= bound * (1 + 1e-6), name
    assert t.abs().max().item() >= bound * (1 - 20 / n), name  # the bound is reached
    # s.e. of a sample std of a uniform: std · √((kurtosis − 1) / 4n), kurtosis 9/5
    expected = bound / math.sqrt(3)
    assert t.std().item() == pytest.approx(expected, rel=5 * math.sqrt(0.2 / n)), name
    assert abs(t.mean().item()) <= 5 * expected / math.sqrt(n), name


def assert_normal(t: torch.Tensor, std: float, name: str) -> None:
    t = t.detach().double().flatten()
    n = t.numel()
    assert t.std().item() == pytest.approx(std, rel=5 / math.sqrt(2 * n)), name
    assert abs(t.mean().item()) <= 5 * std / math.sqrt(n), name
    assert t.abs().max().item() > 3 * std, name  # a normal's tails, not a uniform's


def assert_log_uniform_dt(dt: torch.Tensor, name: str) -> None:
    """Δ ~ logU[dt_min, dt_max]: in range, and uniform on the log scale."""
    dt = dt.detach().double()
    assert dt.min().item() >= DT_MIN * (1 - 1e-5), name
    assert dt.max().item() <= DT_MAX * (1 + 1e-5), name
    u = (dt.log() - math.log(DT_MIN)) / (math.log(DT_MAX) - math.log(DT_MIN))
    # KS critical value at the 0.1% level: 1.95/√n
    assert ks_uniform(u.clamp(0, 1)) < 1.95 / math.sqrt(len(u)), name


@pytest.mark.parametrize("param", PARAMETERIZATIONS)
@pytest.mark.parametrize("width", WIDTHS)
def test_delta_is_log_uniform_between_dt_min_and_dt_max_in_every_layer(param, width):
    model = built(param, width)
    for i, layer in enumerate(model.layers):
        assert_log_uniform_dt(F.softplus(layer.mixer.dt_proj.bias), f"{param} w{width} layer {i}")


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("tied", [True, False])
def test_sp_starts_every_tensor_at_the_reference_init(width, tied):
    model = built("sp", width, tie_embeddings=tied)
    d, d_inner, dt_rank = width, 2 * width, math.ceil(width / 16)
    params = dict(model.named_parameters())
    expected_names = {"embedding.weight", "norm_f.weight"} | (set() if tied else {"lm_head.weight"})
    assert_normal(params["embedding.weight"], 0.02, "embedding")
    assert torch.equal(params["norm_f.weight"], torch.ones(d))
    if not tied:
        assert_uniform(params["lm_head.weight"], 1 / math.sqrt(d), "lm_head")
    for i in range(N_LAYER):
        p = f"layers.{i}."
        mixer = {n[len(p + "mixer."):]: t for n, t in params.items() if n.startswith(p + "mixer.")}
        expected_names |= {p + "norm.weight"} | {p + "mixer." + n for n in mixer}
        assert torch.equal(params[p + "norm.weight"], torch.ones(d))
        assert_uniform(mixer["in_proj.weight"], 1 / math.sqrt(d), p + "in_proj")
        assert_uniform(mixer["conv1d.weight"], 1 / math.sqrt(D_CONV), p + "conv1d.weight")
        assert_uniform(mixer["conv1d.bias"], 1 / math.sqrt(D_CONV), p + "conv1d.bias")
        for part in ("x_proj_dt", "x_proj_B", "x_proj_C"):  # rows of the reference's x_proj
            assert_uniform(mixer[part + ".weight"], 1 / math.sqrt(d_inner), p + part)
        assert_uniform(mixer["dt_proj.weight"], dt_rank ** -0.5, p + "dt_proj.weight")
        assert_log_uniform_dt(F.softplus(mixer["dt_proj.bias"]), p + "dt_proj.bias")
        assert torch.equal(mixer["A_log"], torch.log(torch.arange(1.0, D_STATE + 1)).expand(
            d_inner, D_STATE))
        assert torch.equal(mixer["D"], torch.ones(d_inner))
        assert_uniform(mixer["out_proj.weight"], 1 / math.sqrt(d_inner) / math.sqrt(N_LAYER),
                       p + "out_proj")
    assert set(params) == expected_names  # nothing above was skipped


@pytest.mark.parametrize("param", [p for p in PARAMETERIZATIONS if p != "sp"])
def test_a_parameterization_keeps_every_init_a_module_owns_and_only_rescales_matrices(param):
    # same seed, same draws: what the parameterization does is all that differs from sp
    sp, other = dict(built("sp", 256).named_parameters()), dict(
        built(param, 256).named_parameters())
    for name, ref in sp.items():
        got = other[name]
        if torch.equal(got, ref):
            continue
        assert name.endswith("weight") and got.dim() == 2, f"{param} changed {name}"
        ratio = (got / ref)[ref != 0]
        assert torch.allclose(ratio, ratio[0].expand_as(ratio)), f"{param} re-drew {name}"
    for name in sp:
        if any(k in name for k in ("conv1d", "dt_proj.bias", "A_log", ".D", "norm")):
            assert torch.equal(other[name], sp[name]), name


def test_a_pass_that_overwrites_an_init_a_module_owns_fails_naming_it(monkeypatch):
    # the old bug: re-initialising every scaled layer also zeroed its bias, the Δ bias among them
    rescale = ScaledLinear.rescale_init

    def rescale_and_zero_bias(self, scale):
        rescale(self, scale)
        if self.bias is not None:
            self.bias.data.zero_()

    monkeypatch.setattr(ScaledLinear, "rescale_init", rescale_and_zero_bias)
    with pytest.raises(RuntimeError, match=r"layers\.0\.mixer\.dt_proj\.bias"):
        built("mup_ssm", 128)


@pytest.mark.parametrize("param", PARAMETERIZATIONS)
def test_s4d_keeps_its_inits_and_the_init_schemes_theirs_through_the_build(param):
    # S4D-Lin (state-spaces/s4 dplr.py): Re A = -1/2, Im A = πn; Δ ~ logU[dt_min, dt_max];
    # B = 1, C ~ complex N(0, 1); then the zero-real-parts scheme zeroes a quarter of Re A
    model = built(param, 128, arch="s4d", d_state=8, zero_real_fraction=0.25)
    for i, layer in enumerate(model.layers):
        mixer = layer.mixer
        re, im = mixer.A_re.detach(), mixer.A_im.detach()
        assert int((re == 0).sum()) == round(0.25 * re.numel()), i
        assert torch.equal(re[re != 0], torch.full_like(re[re != 0], -0.5)), i
        assert torch.allclose(im, math.pi * torch.arange(4.0).expand_as(im)), i
        assert_log_uniform_dt(mixer.dt(), f"S4D {i}")
        b = mixer.B.value().detach()
        assert torch.equal(b, torch.ones_like(b)), i
        c = torch.view_as_real(mixer.C.value().detach())
        assert_normal(c, 1 / math.sqrt(2), f"S4D C {i}")
