"""Depth parameterizations (param.depth, depth_alpha, depth_exponents, model.base_n_layer;
mutransfer/param/depth.py).

At L = L_base every depth parameterization is the model without one, bit for bit, as the
trainer builds and trains it; a preset is its α and exponents written out, bit for bit; away
from L_base the branch multiplier, the in-block LRs, Adam's ε (in-block groups only) and the
inits follow docs/parameterizations.md ("Depth"), whose factors are written out here from the
papers' rules, not read from the code. Bad input is refused by `mutransfer validate` in one
line naming the field.
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
def test_branch_multiplier_and_init_follow_the_rule(depth, n_layer, base):
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


@pytest.mark.parametrize("depth", list(ALPHA))
def test_adam_eps_scales_with_depth_only_in_the_blocks(depth):
    """ε × r^-α on the in-block groups; the embedding (tied readout) and the final norm keep
    train.eps, as does an untied readout."""
    r, alpha = 8 / 2, ALPHA[depth]
    cfg = trial({"name": "mup_ssm", "depth": depth}, n_layer=8, base_n_layer=2,
                tie_embeddings=False)
    torch.manual_seed(0)
    opt = make_optimizer(build_model(cfg, BYTES), cfg)
    eps = {n: g["eps"] for g in opt.param_groups for n in g["names"]}
    for name in ("embedding.weight", "norm_f.weight", "lm_head.weight"):
        assert eps[name] == 1e-8, name
    inside = [n for n in eps if n.startswith("layers.")]
    assert inside and all(eps[n] == pytest.approx(1e-8 * r ** -alpha) for n in inside)


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


EVERY_TENSOR = ("hidden", "out_proj", "ssm_B", "ssm_C", "conv", "A_log", "dt", "D", "norm")


@pytest.mark.parametrize("depth,optimizer", [("completep", "adamw"), ("depth_mup", "sgd")])
def test_a_preset_is_its_alpha_and_exponents_written_out_bit_for_bit(depth, optimizer):
    """run_trial at 4 layers over L_base 2: the preset's name alone and its α with every
    in-block tensor's LR and init exponent spelled out give the same loss at every step."""
    alpha = ALPHA[depth]
    spelled = {t: {"lr_adam": alpha - 1, "lr_sgd": 2 * alpha - 1, "init": 0.0}
               for t in EVERY_TENSOR if t not in ("A_log", "D", "norm")}
    spelled.update({t: {"lr_adam": alpha - 1, "lr_sgd": 2 * alpha - 1}
                    for t in ("A_log", "D", "norm")})
    name = {"name": "mup_ssm", "depth": depth}
    plain = losses(trial(name, optimizer, n_layer=4, base_n_layer=2))
    assert plain == losses(trial({**name, "depth_alpha": alpha, "depth_exponents": spelled},
                                 optimizer, n_layer=4, base_n_layer=2))
    assert plain != losses(trial({**name, "depth_alpha": alpha / 2}, optimizer, n_layer=4,
                                 base_n_layer=2))


# Mamba-1's in-block parameters and the depth tensor each one is
MAMBA_TENSORS = {
    "norm.weight": "norm", "mixer.in_proj.weight": "hidden", "mixer.conv1d.weight": "conv",
    "mixer.conv1d.bias": "conv", "mixer.x_proj_dt.weight": "hidden",
    "mixer.x_proj_B.weight": "ssm_B", "mixer.x_proj_C.weight": "ssm_C",
    "mixer.dt_proj.weight": "dt", "mixer.dt_proj.bias": "dt", "mixer.out_proj.weight": "out_proj",
    "mixer.A_log": "A_log", "mixer.D": "D",
}


@pytest.mark.parametrize("tensor", EVERY_TENSOR)
def test_one_tensors_lr_exponent_moves_only_its_parameters(tensor):
    """Adam LR exponent 0.3 on one tensor: its parameters' LR is the width rule × r^0.3, every
    other in-block parameter keeps completep's r^0, and every parameter of every block is named."""
    r = 8 / 2
    base_cfg, base_model = built("none", 8, None)
    width_scale = {n: g["lr_scale"] for g in param_groups(base_model, base_cfg)
                   for n in g["names"]}
    cfg = trial({"name": "mup_ssm", "depth": "completep",
                 "depth_exponents": {tensor: {"lr_adam": 0.3}}}, n_layer=8, base_n_layer=2)
    torch.manual_seed(0)
    scales = {n: g["lr_scale"] for g in param_groups(build_model(cfg, BYTES), cfg)
              for n in g["names"]}
    assert {n.split(".", 2)[2] for n in scales if n.startswith("layers.")} == set(MAMBA_TENSORS)
    for name, scale in scales.items():
        moved = name.startswith("layers.") and MAMBA_TENSORS[name.split(".", 2)[2]] == tensor
        assert scale == pytest.approx(width_scale[name] * (r ** 0.3 if moved else 1.0)), name


def test_init_exponents_rescale_the_block_weights_and_leave_the_biases():
    """init exponent e: the conv's, in_proj's, x_proj_dt's and out_proj's weights × r^e on top
    of their L_base value (out_proj's √(L/L_base) undoes its 1/√n_layer); their biases and the
    Δ bias unchanged."""
    r = 8 / 2
    _, plain = built("none", 8, None)
    cfg = trial({"name": "mup_ssm", "depth": "completep",
                 "depth_exponents": {"conv": {"init": 0.5}, "hidden": {"init": -1.0},
                                     "out_proj": {"init": 0.25}}},
                n_layer=8, base_n_layer=2)
    torch.manual_seed(0)
    model = build_model(cfg, BYTES)
    plain_params = dict(plain.named_parameters())
    for name, p in model.named_parameters():
        local = name.split(".", 2)[-1] if name.startswith("layers.") else ""
        factor = {"mixer.conv1d.weight": r ** 0.5, "mixer.in_proj.weight": r ** -1.0,
                  "mixer.x_proj_dt.weight": r ** -1.0,
                  "mixer.out_proj.weight": r ** 0.25 * math.sqrt(r)}.get(local, 1.0)
        torch.testing.assert_close(p, plain_params[name] * factor, rtol=1e-6, atol=0)


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
    ("depth_alpha not a number", sweep(param={"depth": "completep", "depth_alpha": float("nan")}),
     "param.depth_alpha"),
    ("depth_alpha infinite", sweep(param={"depth": "depth_mup", "depth_alpha": float("inf")}),
     "param.depth_alpha"),
    ("depth_alpha without a depth parameterization", sweep(param={"depth_alpha": 1.0}),
     "param.depth_alpha"),
    ("an LR exponent not finite", sweep(param={
        "depth": "completep", "depth_exponents": {"conv": {"lr_adam": float("-inf")}}}),
     "param.depth_exponents.conv.lr_adam"),
    ("an unknown depth tensor",
     sweep(param={"depth": "completep", "depth_exponents": {"convv": {"lr_adam": 0.2}}}),
     "param.depth_exponents"),
    ("an init exponent on A_log",
     sweep(param={"depth": "completep", "depth_exponents": {"A_log": {"init": 1.0}}}),
     "param.depth_exponents.A_log.init"),
    ("depth_alpha not finite on an axis",
     sweep({"param.depth_alpha": [1.0, float("nan")]}, param={"depth": "completep"}),
     "param.depth_alpha"),
]


@pytest.mark.parametrize("case,doc,needle", BAD, ids=[c[0] for c in BAD])
def test_bad_depth_input_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys, case, doc,
                                                                    needle):
    storage = tmp_path / "results"
    path = write(tmp_path / "sweep.yaml", {"storage": str(storage), **doc})
    assert_one_line_error(capsys, main(["validate", str(path)]), needle)
    assert not storage.exists()


@pytest.mark.parametrize("assignment,needle", [
    ("alpha=0.75", "--depth-set"), ("depth_alpha", "--depth-set"),
    ("depth_alpha=.nan", "param.depth_alpha"),
    ("depth_exponents.conv.lr_adam=.inf", "param.depth_exponents.conv.lr_adam")])
def test_coord_check_refuses_a_bad_depth_field_in_one_line(tmp_path, capsys, assignment,
                                                            needle):
    out = tmp_path / "coord"
    rc = main(["coord-check", "--param", "mup_ssm", "--depths", "1", "2", "--width", "16",
               "--seeds", "0", "--steps", "1", "--depth-param", "completep", "--depth-set",
               assignment, "--out", str(out)])
    assert_one_line_error(capsys, rc, needle)
    assert not out.exists()
