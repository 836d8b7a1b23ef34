"""Depth rules act on what they name or are refused, and `mutransfer autocorr --input layer0`
reads an SSM input only where the model has one (else one line, exit 2).

- A depth parameterization on a model with no residual block (no module with `branch_mult`,
  e.g. a factory's transformer) would change nothing at all: refused, naming param.depth.
- S4D's Δ (log_dt), A (A_re, A_im), B, C and its glu output matrix are the `dt`, `A_log`,
  `ssm_B`, `ssm_C` and `out_proj` tensors of `param.depth_exponents`, as Mamba's are: an
  exponent given for them reaches them (it went to nothing, or to `norm`'s, before).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.data import load_data
from mutransfer.errors import UserError
from mutransfer.models.build import build_model
from mutransfer.optim import make_optimizer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def at_repo(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.chdir(REPO)


def built(cfg: TrialConfig):
    model = build_model(cfg, load_data(cfg.data).spec)
    return model, make_optimizer(model, cfg)


def test_a_depth_rule_on_a_model_without_residual_blocks_is_refused(at_repo):
    cfg = TrialConfig(width=32, model={"arch": "examples.tiny_gpt:tiny_gpt", "base_width": 16,
                                       "n_layer": 4, "base_n_layer": 1},
                      param={"name": "mup", "depth": "completep"},
                      train={"batch_size": 2, "seq_len": 16})
    with pytest.raises(UserError, match="param.depth completep .*no residual block"):
        built(cfg)


def test_a_depth_rule_at_the_base_depth_is_still_the_plain_model_for_any_factory(at_repo):
    cfg = TrialConfig(width=32, model={"arch": "examples.tiny_gpt:tiny_gpt", "base_width": 16,
                                       "n_layer": 2, "base_n_layer": 2},
                      param={"name": "mup", "depth": "completep"})
    built(cfg)  # r = 1: nothing to scale, nothing refused


def s4d_lr_scales(**depth_exponents) -> dict[str, float]:
    """LR over the base LR of each tensor of S4D's block 0 (width = base width: depth only)."""
    cfg = TrialConfig(width=16, model={"arch": "s4d", "n_layer": 4, "base_n_layer": 1,
                                       "d_state": 4, "base_width": 16},
                      param={"name": "mup_ssm", "depth": "completep",
                             "depth_exponents": depth_exponents},
                      train={"optimizer": "adam", "lr": 1.0})
    _, opt = built(cfg)
    return {name.removeprefix("layers.0."): g["lr_scale"] for g in opt.param_groups
            for name in g["names"] if name.startswith("layers.0.")}


@pytest.mark.parametrize("tensor, names", [
    ("dt", ["mixer.log_dt"]),
    ("A_log", ["mixer.A_re", "mixer.A_im"]),
    ("ssm_B", ["mixer.B.weight"]),
    ("ssm_C", ["mixer.C.weight"]),
    ("out_proj", ["mixer.output_linear.weight"]),
])
def test_s4d_tensors_take_their_own_depth_exponent(tensor, names):
    scales = s4d_lr_scales(**{tensor: {"lr_adam": 0.5}})  # completep's default is r^0
    for name, scale in scales.items():
        want = 4.0**0.5 if name in names else 1.0
        assert scale == pytest.approx(want), (tensor, name, scale)


def test_the_norm_exponent_does_not_reach_the_ssms_own_tensors_on_s4d():
    """`norm` is the other vectors (the block's gain, a bias): not S4D's A, Δ, B, C, D."""
    scales = s4d_lr_scales(norm={"lr_adam": 0.5})
    moved = {n for n, s in scales.items() if s != pytest.approx(1.0)}
    assert "norm.weight" in moved
    assert not moved & {"mixer.A_re", "mixer.A_im", "mixer.log_dt", "mixer.B.weight",
                        "mixer.C.weight", "mixer.D"}


@pytest.mark.parametrize("model", [
    {"arch": "mamba2", "n_layer": 1, "d_state": 4, "base_width": 16, "mamba2": {"headdim": 8}},
    {"arch": "examples.tiny_gpt:tiny_gpt", "base_width": 16},
], ids=["mamba2", "factory"])
def test_autocorr_layer0_on_a_model_without_that_input_is_one_line(
        at_repo, tmp_path, capsys, model):
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({"width": 32, "model": model,
                                    "data": {"source": "stdlib"}}))
    code = main(["autocorr", "--data", str(path), "--lengths", "16", "--samples", "2"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and len(err) == 1 and "--input layer0" in err[0] and "--input raw" in err[0]


def test_autocorr_raw_input_of_a_mamba2_config_still_runs(tmp_path, capsys):
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({"width": 32, "model": {
        "arch": "mamba2", "n_layer": 1, "d_state": 4, "base_width": 16,
        "mamba2": {"headdim": 8}}, "data": {"source": "stdlib"}}))
    assert main(["autocorr", "--data", str(path), "--input", "raw", "--lengths", "16",
                 "--samples", "2"]) == 0
    assert "lambda_max" in capsys.readouterr().out
