"""Adam and AdamW take torch's fused CUDA kernels when the whole model is on CUDA."""

from __future__ import annotations

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.optim import all_on_cuda, make_optimizer
from tests.conftest import BYTES


def built(optimizer: str, device: str = "cpu"):
    cfg = TrialConfig(width=16, model={"base_width": 16, "n_layer": 1, "d_state": 4},
                      train={"optimizer": optimizer})
    model = build_model(cfg, BYTES).to(device)
    return model, make_optimizer(model, cfg)


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_not_fused_on_the_cpu(optimizer):
    model, opt = built(optimizer)
    assert not all_on_cuda(model) and not opt.defaults["fused"]


def test_a_model_without_parameters_is_not_on_cuda():
    assert not all_on_cuda(torch.nn.Identity())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_fused_when_every_parameter_is_on_cuda(optimizer):
    model, opt = built(optimizer, "cuda")
    assert opt.defaults["fused"] is True
