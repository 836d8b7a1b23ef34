"""The S4D mixer: its convolution is the diagonal SSM's recurrence, its inits are S4D's, every
parameter has a role, and it trains under every parameterization."""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.models.s4d import S4DMixer, discretize, s4d_init, vandermonde
from mutransfer.models.trace import tracing
from mutransfer.ops.fft_conv import fft_conv
from mutransfer.param.apply import assign_roles
from mutransfer.param.config import PARAMETERIZATIONS
from mutransfer.train import run_trial


def recurrence(mixer: S4DMixer, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequential complex scan: x_t = Ā x_{t-1} + B̄ u_t, y_t = 2 Re(C x_t) + D u_t.

    Ā and B̄ from the textbook formulas (ZOH: e^{ΔA}, (e^{ΔA} - 1)/A · B; bilinear:
    (1 + ΔA/2)/(1 - ΔA/2), Δ B/(1 - ΔA/2)), independently of the kernel code.
    """
    A = torch.complex(mixer.A_re, mixer.A_im).detach().to(torch.complex128)
    dt = mixer.dt().detach().double()[:, None]
    B = mixer.B.value().detach().to(torch.complex128)
    C = mixer.C.value().detach().to(torch.complex128)
    if mixer.discretization == "zoh":
        dA = torch.exp(dt * A)
        dB = torch.where(A == 0, dt + 0j, (dA - 1) / torch.where(A == 0, 1, A)) * B
    else:
        dA = (1 + dt * A / 2) / (1 - dt * A / 2)
        dB = dt * B / (1 - dt * A / 2)
    x = torch.zeros(u.shape[0], *A.shape, dtype=torch.complex128)
    ys, states = [], []
    for t in range(u.shape[-1]):
        x = dA * x + dB * u[:, :, None, t]
        states.append(x)
        ys.append(2 * (C * x).sum(-1).real + mixer.D.detach().double() * u[:, :, t])
    return torch.stack(ys, -1), torch.stack(states, -1)


@pytest.mark.parametrize("discretization", ["zoh", "bilinear"])
@pytest.mark.parametrize("init", ["lin", "inv", "legs", "real"])
def test_convolution_equals_the_recurrence(discretization: str, init: str) -> None:
    torch.manual_seed(0)
    mixer = S4DMixer(6, 6, d_state=8, init=init, discretization=discretization)
    with torch.no_grad():  # zero real parts (with A = 0 exactly for the first mode of lin)
        mixer.A_re[:2] = 0.0
    u = torch.randn(3, 6, 40, dtype=torch.float64)
    y_ref, x_ref = recurrence(mixer, u)
    y = fft_conv(u.float(), mixer.kernel(40)) + u.float() * mixer.D[:, None]
    assert torch.allclose(y.double(), y_ref, atol=2e-4, rtol=1e-3)
    assert torch.allclose(mixer.states(u.float()).to(torch.complex128), x_ref, atol=2e-4)


def test_forward_records_the_ssm_output_and_state() -> None:
    torch.manual_seed(0)
    mixer = S4DMixer(4, 4, d_state=4, layer_idx=1)
    h = torch.randn(2, 16, 4)
    with tracing() as acts:
        out = mixer(h)
    assert out.shape == h.shape
    u = h.transpose(1, 2)
    y_ref, x_ref = recurrence(mixer, u.double())
    assert torch.allclose(acts["layer1.ssm_out"].double(), y_ref, atol=1e-4)
    assert torch.allclose(acts["layer1.ssm_state_out"].double(),
                          y_ref - u.double() * mixer.D.detach().double()[:, None], atol=1e-4)
    assert acts["layer1.ssm_state"].shape == (2, 4, 2, 16, 2)


def test_inits_are_those_of_s4d() -> None:
    re, im = s4d_init("lin", 3, 8)
    assert torch.equal(re, torch.full((3, 4), -0.5))
    assert torch.allclose(im[0], math.pi * torch.arange(4.0))
    re, im = s4d_init("real", 3, 8)
    assert torch.equal(re[1], -torch.arange(1.0, 5.0)) and not im.any()
    _, im = s4d_init("inv", 1, 8)
    n = torch.arange(4.0)
    assert torch.allclose(im[0], 8 / math.pi * (8 / (1 + 2 * n) - 1))


def test_legs_init_is_the_spectrum_of_the_normal_hippo_legs_matrix() -> None:
    n = 8
    k = torch.arange(n, dtype=torch.float64)
    # HiPPO-LegS: A_nk = -√(2n+1)√(2k+1) below the diagonal, -(n+1) on it; P_n = √(n + 1/2)
    legs = -torch.tril(torch.sqrt(2 * k + 1)[:, None] * torch.sqrt(2 * k + 1)[None, :], -1)
    legs = legs - torch.diag(k + 1)
    p = torch.sqrt(k + 0.5)
    eig = torch.linalg.eigvals(legs + torch.outer(p, p))
    upper = eig[eig.imag > 0]
    re, im = s4d_init("legs", 1, n)
    assert torch.allclose(upper.real, torch.full_like(upper.real, -0.5), atol=1e-8)
    assert torch.allclose(im[0].double(), upper.imag.sort().values, rtol=1e-5)
    assert torch.equal(re, torch.full((1, 4), -0.5))


def test_dt_is_log_uniform_in_the_range() -> None:
    torch.manual_seed(0)
    dt = S4DMixer(4096, 64, d_state=2, dt_min=1e-3, dt_max=1e-1).dt().detach()
    assert dt.min() >= 1e-3 * (1 - 1e-5) and dt.max() <= 1e-1 * (1 + 1e-5)
    quartiles = torch.quantile(torch.log10(dt), torch.tensor([0.25, 0.5, 0.75]))
    assert torch.allclose(quartiles, torch.tensor([-2.5, -2.0, -1.5]), atol=0.05)


def test_feature_gram_of_lin_with_zero_real_is_well_conditioned_and_real_is_not() -> None:
    """S4D's basis kernels Re(e^{A_n Δ l}), l < L, Δ = 1/L: with Re(A) = 0, S4D-Lin's are the
    cosines cos(πnl/L), orthogonal (condition number 2: the n = 0 one has twice the norm);
    S4D-Real's e^{-(n+1)l/L} are nearly collinear."""
    length = 1024
    dt = torch.full((1,), 1.0 / length, dtype=torch.float64)

    def condition(re: torch.Tensor, im: torch.Tensor) -> float:
        log_dA, _ = discretize(torch.complex(re.double(), im.double()), dt, "zoh")
        feats = vandermonde(log_dA, length).real[0]  # (modes, L)
        eig = torch.linalg.eigvalsh(feats @ feats.T / length)
        assert eig[0] > 0
        return float(eig[-1] / eig[0])

    _, im = s4d_init("lin", 1, 16)
    assert condition(torch.zeros_like(im), im) < 3
    re, im = s4d_init("real", 1, 16)
    assert condition(re, im) > 1e6


def test_keep_nonpositive_projects_re_a_and_keeps_its_gradient() -> None:
    torch.manual_seed(0)
    kept = S4DMixer(4, 4, d_state=4, keep_nonpositive=True)
    free = S4DMixer(4, 4, d_state=4)
    for mixer in (kept, free):
        with torch.no_grad():
            mixer.A_re.fill_(0.3)
        mixer(torch.randn(2, 8, 4)).pow(2).sum().backward()
    assert (kept.A_re == 0).all() and kept.A_re.grad.abs().sum() > 0
    assert (free.A_re == 0.3).all()


def _cfg(**model) -> TrialConfig:
    return TrialConfig(width=16, model={"arch": "s4d", "n_layer": 2, "d_state": 8,
                                        "base_width": 8, **model},
                       data={"source": "synthetic", "task": "memory", "rho": "poly"},
                       train={"seq_len": 32, "batch_size": 4, "steps": 3, "eval_every": 3,
                              "eval_batches": 1, "lr": 3e-3})


@pytest.mark.parametrize("output", ["glu", "gated"])
@pytest.mark.parametrize("ssm_roles", ["vector", "ssm"])
def test_every_parameter_has_its_documented_role(output: str, ssm_roles: str) -> None:
    cfg = _cfg(s4d={"output": output, "ssm_roles": ssm_roles})
    model = build_model(cfg, load_data(cfg.data).spec)
    roles = assign_roles(model)
    names = {n for n, _ in model.named_parameters()}
    assert set(roles) == names
    mixer = {n.split("mixer.", 1)[1]: r for n, r in roles.items()
             if n.startswith("layers.0.mixer.")}
    b, c = ("ssm_B", "ssm_C") if ssm_roles == "ssm" else ("vector", "vector")
    expected = {"A_re": "vector", "A_im": "vector", "log_dt": "vector", "D": "vector",
                "B.weight": b, "C.weight": c}
    if output == "glu":
        expected |= {"output_linear.weight": "hidden", "output_linear.bias": "vector"}
    else:
        expected |= {"gate.weight": "hidden", "out_proj.weight": "hidden"}
    assert mixer == expected


def test_ssm_roles_let_the_parameterization_scale_b_and_c() -> None:
    """Under SP at twice the base width the ssm_B rule scales the init by m^-1/2; the vector
    role keeps B at its reference (ones)."""
    for roles, expected in (("vector", 1.0), ("ssm", 2 ** -0.5)):
        cfg = _cfg(s4d={"ssm_roles": roles})
        model = build_model(cfg, load_data(cfg.data).spec)
        b = model.layers[0].mixer.B.value()
        assert torch.allclose(b.real, torch.full_like(b.real, expected)) and not b.imag.any()


@pytest.mark.parametrize("param", PARAMETERIZATIONS)
def test_trains_under_every_parameterization(param: str) -> None:
    cfg = _cfg(zero_real_fraction=0.25, keep_nonpositive=True, s4d={"ssm_roles": "ssm"})
    cfg = cfg.model_copy(update={"param": cfg.param.model_copy(update={"name": param})})
    result = run_trial(cfg)
    assert result.status == "complete" and result.steps_done == 3
    assert all(math.isfinite(h["eval_loss"]) for h in result.history)
    assert result.final_eval_loss < result.initial_loss


def test_odd_d_state_is_a_user_error() -> None:
    from mutransfer.errors import UserError

    with pytest.raises(UserError, match="even d_state"):
        S4DMixer(4, 4, d_state=5)
