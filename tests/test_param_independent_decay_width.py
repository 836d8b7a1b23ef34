"""train.weight_decay_mode independent under a width parameterization: the fraction of a
weight decayed per step is train.weight_decay at every width, as the decay per step LR·wd is
under coupled mode (and under the mup library's MuAdamW). The decay used to be the group's
weight_decay, which the parameterization had divided by the LR's width factor to make up for
an LR that independent mode takes out: the hidden matrices under mup decayed by
weight_decay · m per step (0.004 instead of 0.001 at m = 4)."""

from __future__ import annotations

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.optim import make_optimizer
from tests.conftest import BYTES

BASE = 32
WD = 1e-3
PROBES = ("layers.0.mixer.in_proj.weight", "layers.0.mixer.x_proj_B.weight",
          "layers.0.mixer.x_proj_C.weight", "embedding.weight")


def decayed_fraction(param: str, width: int, lr: float) -> dict[str, float]:
    """One AdamW step with zero gradients (the step is the decay alone) on the model and
    optimizer as a trial builds them: the fraction of each probed weight it removed."""
    cfg = TrialConfig(width=width, param={"name": param},
                      model={"base_width": BASE, "n_layer": 1, "d_state": 4},
                      train={"optimizer": "adamw", "lr": lr, "weight_decay": WD,
                             "weight_decay_mode": "independent"})
    torch.manual_seed(0)
    model = build_model(cfg, BYTES)
    opt = make_optimizer(model, cfg)
    params = dict(model.named_parameters())
    before = {name: params[name].detach().clone() for name in PROBES}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return {name: 1 - (params[name].detach().double().norm()
                       / before[name].double().norm()).item() for name in PROBES}


@pytest.mark.parametrize("param", ["sp", "mup", "spectral", "mup_ssm"])
def test_every_decayed_weight_loses_train_weight_decay_per_step_at_four_times_the_base_width(
        param):
    for name, fraction in decayed_fraction(param, 4 * BASE, lr=3e-3).items():
        assert fraction == pytest.approx(WD, rel=1e-3), name


def test_the_decay_per_step_does_not_move_with_the_base_lr_at_any_width():
    for width in (BASE, 2 * BASE):
        small, large = decayed_fraction("mup_ssm", width, 1e-3), \
            decayed_fraction("mup_ssm", width, 1e-2)
        assert small == pytest.approx(large, rel=1e-3)
