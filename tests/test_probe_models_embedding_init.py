"""An init exponent given to the embedding role is a power of m = width / base_width on every
model (docs/parameterizations.md: only a matrix's init uses its own fan-in ratio). An
embedding's fan-in is the vocabulary, or a real input's dimension, which does not grow with
width: read as the embedding's ratio, `param.overrides.embedding.init_m` was m^0 on a factory's
nn.Embedding and on the built-in models' real-input encoder, silently."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.models.build import build_model

REPO = Path(__file__).resolve().parents[1]
OVERRIDE = {"name": "mup", "overrides": {"embedding": {"init_m": -0.5}}}


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.chdir(REPO)


def embedding_std(width: int, model: dict, data: dict, name: str, param=OVERRIDE) -> float:
    cfg = TrialConfig(width=width, model={"base_width": 16, **model}, param=param, data=data)
    torch.manual_seed(0)
    built = build_model(cfg, load_data(cfg.data).spec)
    return dict(built.named_parameters())[name].detach().std().item()


CASES = {
    "factory nn.Embedding": ({"arch": "examples.tiny_gpt:tiny_gpt"}, {"source": "stdlib"},
                             "tok.weight"),
    "mamba's real-input encoder": ({"arch": "mamba", "n_layer": 1, "d_state": 4},
                                   {"source": "synthetic", "task": "memory"},
                                   "embedding.weight"),
    "mamba's token embedding": ({"arch": "mamba", "n_layer": 1, "d_state": 4},
                                {"source": "stdlib"}, "embedding.weight"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_embedding_init_exponent_scales_with_the_width(case):
    model, data, name = CASES[case]
    ratio = embedding_std(64, model, data, name) / embedding_std(16, model, data, name)
    assert ratio == pytest.approx(4**-0.5, rel=0.1), ratio


@pytest.mark.parametrize("case", CASES)
def test_without_an_override_the_embedding_keeps_its_std_at_every_width(case):
    model, data, name = CASES[case]
    plain = {"name": "mup"}
    ratio = embedding_std(64, model, data, name, plain) / embedding_std(16, model, data, name,
                                                                         plain)
    assert ratio == pytest.approx(1.0, rel=0.1), ratio
