"""Depth parameterizations (param.depth, model.base_n_layer; mutransfer/param/depth.py).

At L = L_base every depth parameterization is the model without one, bit for bit, as the
trainer builds and trains it; away from it the branch multiplier, the in-block LRs, Adam's ε
and out_proj's init follow docs/parameterizations.md ("Depth"), whose factors are written out
here from the papers' rules, not read from the code. Bad input is refused by
`mutransfer validate` in one line naming the field.
"""

from __future__ import annotations

import math

import pytest
import torch

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.optim import make_optimizer
from mutransfer.param.apply import param_groups
from mutransfer.train import run_trial
from tests.conftest import BYTES
from tests.test_bad_input import assert_one_line_error, sweep, with_model, write

ALPHA = {"depth_mup": 0.5, "completep": 1.0}
TRIAL = {"width": 32, "model": {"base_width": 16, "n_layer": 2, "d_state": 4},
         "train": {"lr": 3e-3, "steps": 6, "batch_size": 2, "seq_len": 16, "eval_every": 3,
                   "eval_batches": 1}}


def trial(param: dict, optimizer: str = "adamw", **model) -> TrialConfig:
    return TrialConfig.model_validate({
        **TRIAL, "param": param, "model": {**TRIAL["model"], **model},
        "train": {**TRIAL["train"], "optimizer": optimizer,
                  **({"lr": 0.1} if optimizer == "sgd" else {})}})


def losses(cfg: TrialConfig) -> list[float]:
    """Every eval loss and every train loss (the first report has none: NaN) of a trial."""
    history = run_trial(cfg).history
    return [h["eval_loss"] for h in history] + [h["train_loss"] for h in history[1:]]


@pytest.mark.parametrize("name,optimizer", [("sp", "adamw"), ("mup_ssm", "sgd")])
def test_at_the_base_depth_every_depth_parameterization_trains_bit_identically(name, optimizer):
    """run_trial (build_model, make_optimizer, the loop) at width 32 over base 16: the losses
    of every step are equal, with base_n_layer left to default and set to n_layer."""
    reference = losses(trial({"name": name}, optimizer))
    for depth in ALPHA:
        assert losses(trial({"name": name, "depth": depth}, optimizer)) == reference, depth
        assert losses(trial({"name": name, "depth": depth}, optimizer,
                            base_n_layer=2)) == reference, depth


def test_none_ignores_base_n_layer():
    assert losses(trial({"name": "mup_ssm"}, base_n_layer=1)) == losses(trial({"name": "mup_ssm"}))


def built(depth: str, n_layer: int, base: int | None, optimizer: str = "adamw"):
    cfg = trial({"name": "mup_ssm", "depth": depth}, optimizer, n_layer=n_layer,
                base_n_layer=base)
    torch.manual_seed(0)
    return cfg, build_model(cfg, BYTES)


@pytest.mark.parametrize("depth", list(ALPHA))
@pytest.mark.parametrize("n_layer,base", [(8, 2), (1, 4)])
def test_branch_multiplier_init_and_eps_follow_the_rule(depth, n_layer, base):
    r, alpha = n_layer / base, ALPHA[depth]
    cfg, model = built(depth, n_layer, base)
    _, plain = built("none", n_layer, None)
    assert [b.branch_mult for b in model.layers] == pytest.approx([r ** -alpha] * n_layer)
    # out_proj's reference init carries 1/√n_layer; the depth parameterization keeps the
    # value at L_base (the same draw, times √(L/L_base)); every other parameter is unchanged
    plain_params = dict(plain.named_parameters())
    for name, p in model.named_parameters():
        factor = math.sqrt(r) if name.endswith("out_proj.weight") else 1.0
        torch.testing.assert_close(p, plain_params[name] * factor, rtol=1e-6, atol=0)
    assert make_optimizer(model, cfg).defaults["eps"] == pytest.approx(1e-8 * r ** -alpha)


@pytest.mark.parametrize("depth", list(ALPHA))
@pytest.mark.parametrize("optimizer,exponent", [("adamw", lambda a: a - 1),
                                                ("sgd", lambda a: 2 * a - 1)])
def test_in_block_lrs_scale_with_depth_and_the_rest_do_not(depth, optimizer, exponent):
    """Adam: r^(α-1), SGD: r^(2α-1) on every parameter of a block (norm and mixer), on top of
    its width rule; the embedding (tied readout) and the final norm keep the width rule."""
    r = 8 / 2
    cfg, model = built(depth, 8, 2, optimizer)
    base_cfg, base_model = built("none", 8, None, optimizer)
    width_scale = {n: g["lr_scale"] for g in param_groups(base_model, base_cfg)
                   for n in g["names"]}
    seen = set()
    for g in param_groups(model, cfg):
        for name in g["names"]:
            inside = name.startswith("layers.")
            expected = width_scale[name] * (r ** exponent(ALPHA[depth]) if inside else 1.0)
            assert g["lr_scale"] == pytest.approx(expected), name
            seen.add(name)
    assert {"embedding.weight", "norm_f.weight", "layers.7.norm.weight",
            "layers.0.mixer.A_log"} <= seen


def test_the_block_adds_the_multiplied_branch():
    _, model = built("completep", 4, 1)
    block, x = model.layers[1], torch.randn(2, 5, 32)
    expected = x + 0.25 * block.mixer(block.norm(x))
    torch.testing.assert_close(block(x), expected)


def test_deeper_completep_keeps_the_residual_stream_at_init_where_none_grows():
    """At init the branches' sum grows as √L under `none` with out_proj at the base init; the
    1/L multiplier keeps it bounded: the last block's output RMS barely moves from 1 to 16."""
    ids = torch.randint(0, 256, (4, 32))

    def stream_rms(depth: str, n_layer: int) -> float:
        _, model = built(depth, n_layer, 1)
        x = model.embedding(ids)
        for layer in model.layers:
            x = layer(x)
        return x.pow(2).mean().sqrt().item()

    assert stream_rms("completep", 16) / stream_rms("completep", 1) < 1.5


# -- bad input, through `mutransfer validate` ------------------------------------------------

BAD = [
    ("base_n_layer zero", with_model(base_n_layer=0), "model.base_n_layer"),
    ("base_n_layer negative with completep",
     {**with_model(base_n_layer=-2), "param": {"depth": "completep"}}, "model.base_n_layer"),
    ("n_layer zero with depth_mup",
     {**with_model(n_layer=0), "param": {"depth": "depth_mup"}}, "model.n_layer"),
    ("unknown depth parameterization", sweep(param={"depth": "complete_p"}), "param.depth"),
    ("unknown depth on an axis", sweep({"param.depth": ["none", "deep"]}), "param.depth"),
    ("zero layers on an axis with completep",
     sweep({"model.n_layer": [0, 2]}, param={"depth": "completep"}), "model.n_layer"),
]


@pytest.mark.parametrize("case,doc,needle", BAD, ids=[c[0] for c in BAD])
def test_bad_depth_input_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys, case, doc,
                                                                    needle):
    storage = tmp_path / "results"
    path = write(tmp_path / "sweep.yaml", {"storage": str(storage), **doc})
    assert_one_line_error(capsys, main(["validate", str(path)]), needle)
    assert not storage.exists()
