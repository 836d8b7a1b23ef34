"""The parameterization tables as implemented agree with the role table of
docs/parameterizations.md, role by role.

Each expectation below is written out from the design table, not read from the code: std and
LR of every role, relative to the base width, at two widths and for both optimizer families.
"""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.param.apply import param_groups
from tests.conftest import BYTES

BASE = 64
# exponents of m = width / base for (init std, Adam LR, SGD LR, forward multiplier)
TABLE = {
    "sp": {"embedding": (0, 0, 0, 0), "hidden": (-0.5, 0, 0, 0), "vector": (None, 0, 0, 0),
           "ssm_B": (-0.5, 0, 0, 0), "ssm_C": (-0.5, 0, 0, 0), "readout": (-0.5, 0, 0, 0)},
    "mup": {"embedding": (0, 0, 1, 0), "hidden": (-0.5, -1, 0, 0), "vector": (None, 0, 1, 0),
            "ssm_B": (-0.5, 0, 1, 0), "ssm_C": (-0.5, 0, 1, 0), "readout": (0, 0, 1, -1)},
    "spectral": {"embedding": (0, 0, 1, 0), "hidden": (-0.5, -1, 0, 0),
                 "vector": (None, 0, 1, 0), "ssm_B": (-1, -1, -1, 0), "ssm_C": (-1, -1, -1, 0),
                 "readout": (0, 0, 1, -1)},
    "mup_ssm": {"embedding": (0, 0, 1, 0), "hidden": (-0.5, -1, 0, 0),
                "vector": (None, 0, 1, 0), "ssm_B": (-0.5, -1, -0.5, 0),
                "ssm_C": (-0.5, -1, -0.5, 0), "readout": (0, 0, 1, -1)},
}
# a parameter of each role and its std at the base width under the reference init
PROBE = {
    "embedding": ("embedding.weight", 0.02),
    "hidden": ("layers.0.mixer.in_proj.weight", 1 / math.sqrt(3 * BASE)),
    "ssm_B": ("layers.0.mixer.x_proj_B.weight", 1 / math.sqrt(3 * 2 * BASE)),
    "ssm_C": ("layers.0.mixer.x_proj_C.weight", 1 / math.sqrt(3 * 2 * BASE)),
    "readout": ("lm_head.weight", 1 / math.sqrt(3 * BASE)),
}


def make(param: str, width: int, optimizer: str = "adam", d_state: int = 16,
         base_d_state: int = 16):
    cfg = TrialConfig(width=width, param={"name": param},
                      model={"base_width": BASE, "n_layer": 1, "tie_embeddings": False,
                             "d_state": d_state, "base_d_state": base_d_state},
                      train={"optimizer": optimizer, "lr": 1e-3})
    torch.manual_seed(0)
    return cfg, build_model(cfg, BYTES)


def lr_scale_of(cfg, model, role: str) -> float:
    return next(g["lr_scale"] for g in param_groups(model, cfg) if g["role"] == role)


@pytest.mark.parametrize("param", list(TABLE))
@pytest.mark.parametrize("width", [128, 512])
def test_init_std_follows_the_table(param, width):
    _, model = make(param, width)
    params = dict(model.named_parameters())
    m = width / BASE
    for role, (name, base_std) in PROBE.items():
        expected = base_std * m ** TABLE[param][role][0]
        assert params[name].std().item() == pytest.approx(expected, rel=0.06), (param, role)


@pytest.mark.parametrize("param", list(TABLE))
@pytest.mark.parametrize("width", [128, 512])
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_lr_multipliers_follow_the_table(param, width, optimizer):
    cfg, model = make(param, width, optimizer)
    m = width / BASE
    column = 1 if optimizer == "adam" else 2
    for role, exps in TABLE[param].items():
        assert lr_scale_of(cfg, model, role) == pytest.approx(m ** exps[column]), (param, role)


@pytest.mark.parametrize("param", list(TABLE))
def test_readout_multiplier_follows_the_table(param):
    _, model = make(param, 256)
    assert model.readout_mult == pytest.approx(4.0 ** TABLE[param]["readout"][3])


def test_vector_parameters_keep_their_reference_values_at_every_width():
    for param in TABLE:
        _, model = make(param, 256)
        mixer = model.layers[0].mixer
        assert torch.equal(mixer.D, torch.ones_like(mixer.D))
        assert torch.allclose(mixer.A_log[0].exp(), torch.arange(1.0, 17.0))
        assert torch.equal(model.norm_f.weight, torch.ones_like(model.norm_f.weight))


def test_every_parameterization_equals_the_reference_model_at_base_width():
    stds = {}
    for param in TABLE:
        _, model = make(param, BASE)
        stds[param] = {n: p.std().item() for n, p in model.named_parameters() if p.numel() > 1}
    for param in TABLE:
        assert stds[param] == stds["sp"], param


def test_mup_ssm_scales_B_and_C_with_d_state_as_the_paper_says():
    # σ_B ∝ √(N/N_u), σ_C ∝ 1/√(N·N_u); SGD η_B ∝ √(N/N_u), η_C ∝ 1/(N·√N_u)
    cfg, model = make("mup_ssm", 256, "sgd", d_state=64, base_d_state=16)
    _, base = make("mup_ssm", 256, "sgd", d_state=16, base_d_state=16)
    p, q = dict(model.named_parameters()), dict(base.named_parameters())
    b, c = "layers.0.mixer.x_proj_B.weight", "layers.0.mixer.x_proj_C.weight"
    assert p[b].std().item() / q[b].std().item() == pytest.approx(2.0, rel=0.06)
    assert p[c].std().item() / q[c].std().item() == pytest.approx(0.5, rel=0.06)
    base_cfg = make("mup_ssm", 256, "sgd")[0]
    ratio_b = lr_scale_of(cfg, model, "ssm_B") / lr_scale_of(base_cfg, base, "ssm_B")
    ratio_c = lr_scale_of(cfg, model, "ssm_C") / lr_scale_of(base_cfg, base, "ssm_C")
    assert ratio_b == pytest.approx(2.0)
    assert ratio_c == pytest.approx(0.25)


def test_an_override_replaces_one_entry_and_keeps_the_rest():
    cfg = TrialConfig(width=256, param={"name": "mup_ssm",
                                        "overrides": {"ssm_B": {"lr_adam_m": 0.0,
                                                                "lr_mult": 3.0}}},
                      model={"base_width": BASE, "n_layer": 1})
    model = build_model(cfg, BYTES)
    assert lr_scale_of(cfg, model, "ssm_B") == pytest.approx(3.0)
    assert lr_scale_of(cfg, model, "ssm_C") == pytest.approx(1 / 4)
    assert lr_scale_of(cfg, model, "hidden") == pytest.approx(1 / 4)


def test_independent_weight_decay_keeps_lr_times_wd_constant():
    cfg = TrialConfig(width=256, param={"name": "mup", "overrides": {"hidden": {
        "wd": "independent"}}}, model={"base_width": BASE, "n_layer": 1},
        train={"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.1})
    groups = {g["role"]: g for g in param_groups(build_model(cfg, BYTES), cfg)}
    assert groups["hidden"]["lr"] * groups["hidden"]["weight_decay"] == pytest.approx(1e-4)
    assert groups["embedding"]["weight_decay"] == pytest.approx(0.1)
    assert groups["vector"]["weight_decay"] == 0.0


@pytest.mark.parametrize("name", ["mup", "spectral", "mup_ssm"])
@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_weight_decay_per_step_is_the_base_widths_as_in_the_mup_library(name, optimizer):
    """MuAdamW/MuSGD (microsoft/mup, mup/optim.py) divide each group's weight_decay by its LR's
    width factor, so LR·wd stays constant in width; the old tables kept wd and let LR·wd fall
    as 1/m on the hidden matrices (0.025 instead of 0.1 at m = 4)."""
    lr, wd = 0.5, 0.2
    decay = {}
    for width in (BASE, 4 * BASE):
        cfg = TrialConfig(width=width, param={"name": name}, model={
            "base_width": BASE, "n_layer": 1}, train={"optimizer": optimizer, "lr": lr,
                                                      "weight_decay": wd, "momentum": 0.0})
        decay[width] = {g["role"]: g["lr"] * g["weight_decay"]
                        for g in param_groups(build_model(cfg, BYTES), cfg)}
    assert decay[BASE]["hidden"] == pytest.approx(lr * wd)
    assert decay[4 * BASE] == pytest.approx(decay[BASE])
    assert decay[4 * BASE]["vector"] == 0.0


def test_decoupled_decay_of_a_hidden_matrix_in_one_adamw_step_is_the_base_widths():
    from mutransfer.optim import make_optimizer

    cfg = TrialConfig(width=4 * BASE, param={"name": "mup"}, model={
        "base_width": BASE, "n_layer": 1}, train={"optimizer": "adamw", "lr": 0.5,
                                                  "weight_decay": 0.2})
    model = build_model(cfg, BYTES)
    w = dict(model.named_parameters())[PROBE["hidden"][0]]
    before = w.detach().clone()
    opt = make_optimizer(model, cfg)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: the step is the decay alone
    opt.step()
    assert torch.allclose(w.detach(), before * (1 - 0.5 * 0.2))


def test_independent_weight_decay_compensates_the_width_factor_not_a_tuned_lr_mult():
    cfg = TrialConfig(width=BASE, param={"name": "mup", "overrides": {"hidden": {
        "lr_mult": 4.0}}}, model={"base_width": BASE, "n_layer": 1},
        train={"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.1})
    groups = {g["role"]: g for g in param_groups(build_model(cfg, BYTES), cfg)}
    assert groups["hidden"]["lr"] == pytest.approx(4e-3)
    assert groups["hidden"]["weight_decay"] == pytest.approx(0.1)
