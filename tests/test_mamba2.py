"""`model.arch: mamba2`, the Mamba-2 (SSD) mixer, as `run_trial` and the CLI build it."""

from __future__ import annotations

import pytest
import torch
import yaml

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.coord.anymodel import quantity_params
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.models.mamba2 import GatedRMSNorm, Mamba2Mixer
from mutransfer.models.trace import tracing
from mutransfer.optim import make_optimizer
from mutransfer.train import run_trial
from tests.sweeps import tiny_sweep

MAMBA2 = {"arch": "mamba2", "n_layer": 1, "d_state": 4, "base_width": 16,
          "mamba2": {"headdim": 8, "chunk_size": 8}}
TRAIN = {"steps": 4, "batch_size": 2, "seq_len": 16, "eval_every": 4, "eval_batches": 1}


def cfg(width: int = 32, param: str = "sp", **mamba2) -> TrialConfig:
    model = {**MAMBA2, "mamba2": {**MAMBA2["mamba2"], **mamba2}}
    return TrialConfig(width=width, model=model, param={"name": param}, train=TRAIN)


def built(c: TrialConfig):
    torch.manual_seed(0)
    return build_model(c, load_data(c.data).spec)


def test_mixer_is_the_same_function_under_every_scan_backend_and_when_traced():
    torch.manual_seed(0)
    mixer = Mamba2Mixer(32, 16, d_state=4, headdim=8, ngroups=2, chunk_size=8).double()
    h = torch.randn(2, 19, 32, dtype=torch.float64, requires_grad=True)
    outs = {}
    for backend in ("chunked", "reference", "quadratic"):
        mixer.scan_backend = backend
        y = mixer(h)
        outs[backend] = (y, torch.autograd.grad(y.square().sum(), [h, mixer.A_log,
                                                                   mixer.in_proj_B.weight]))
    with tracing() as trace:
        y_traced = mixer(h)
    y0, g0 = outs["chunked"]
    for y, g in outs.values():
        assert torch.allclose(y, y0, atol=1e-10)
        assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(g, g0))
    assert torch.allclose(y_traced, y0, atol=1e-10)
    assert trace["layer0.ssm_state"].shape == (2, 8, 8, 4, 19)  # (b, heads, headdim, n, L)
    assert {"layer0.in_proj", "layer0.conv", "layer0.delta", "layer0.B", "layer0.C",
            "layer0.ssm_state_out", "layer0.ssm_out"} <= set(trace)


def test_gated_norm_normalises_each_group_of_y_times_silu_z():
    norm = GatedRMSNorm(8, group_size=4)
    y, z = torch.randn(3, 8), torch.randn(3, 8)
    g = (y * torch.nn.functional.silu(z)).view(3, 2, 4)
    want = g / g.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    assert torch.allclose(norm(y, z), want.view(3, 8), atol=1e-6)


def test_heads_widen_at_fixed_headdim_or_headdim_at_fixed_heads():
    heads = [built(cfg(w)).layers[0].mixer for w in (16, 64)]
    assert [(m.nheads, m.headdim) for m in heads] == [(4, 8), (16, 8)]
    dims = [built(cfg(w, widen="headdim")).layers[0].mixer for w in (16, 64)]
    assert [(m.nheads, m.headdim) for m in dims] == [(4, 8), (4, 32)]


def test_every_parameter_has_its_role():
    roles = built(cfg()).mutransfer_roles
    mixer = {k.removeprefix("layers.0.mixer."): v for k, v in roles.items() if ".mixer." in k}
    assert mixer == {
        "in_proj_zx.weight": "hidden", "in_proj_B.weight": "ssm_B", "in_proj_C.weight": "ssm_C",
        "in_proj_dt.weight": "hidden", "conv1d.weight": "vector", "conv1d.bias": "vector",
        "dt_bias": "vector", "A_log": "vector", "D": "vector", "norm.weight": "vector",
        "out_proj.weight": "hidden"}


def test_the_check_names_the_tensors_behind_each_quantity_mamba2_records():
    """`mutransfer check` says which tensors feed a failing quantity (`behind it: ...`)."""
    model = built(cfg())
    behind = quantity_params(model, dict(model.mutransfer_roles))
    with torch.no_grad(), tracing() as acts:
        model(torch.randint(0, 256, (1, 16)))
    mixer = "layers.0.mixer."
    named = {q.removeprefix("layer0."): {n.removeprefix(mixer) for n in behind(q)}
             for q in acts if q.startswith("layer0.")}
    assert named == {
        "in_proj": {"in_proj_zx.weight"}, "conv": {"conv1d.weight", "conv1d.bias"},
        "delta": {"in_proj_dt.weight", "dt_bias"}, "B": {"in_proj_B.weight"},
        "C": {"in_proj_C.weight"}, "ssm_state": {"in_proj_B.weight", "in_proj_dt.weight"},
        "ssm_state_out": {"in_proj_C.weight", "in_proj_B.weight"}, "ssm_out": {"D"},
        "block_out": {"out_proj.weight"}}


def test_reference_init_of_dt_bias_and_a():
    mixer = Mamba2Mixer(256, 64, d_state=4, headdim=4, dt_min=0.01, dt_max=0.05)
    dt = torch.nn.functional.softplus(mixer.dt_bias)
    assert dt.min() >= 0.01 - 1e-6 and dt.max() <= 0.05 + 1e-6
    A = mixer.A_log.exp()
    assert A.min() >= 1 and A.max() <= 16 and mixer.D.eq(1).all()


@pytest.mark.parametrize("param", ["sp", "mup", "spectral", "mup_ssm"])
def test_trains_under_every_parameterization(param):
    r = run_trial(cfg(32, param))
    assert r.steps_done == 4 and r.final_eval_loss < r.initial_loss


def test_mup_ssm_gives_b_and_c_adam_lr_over_m_and_mup_does_not():
    def lr_scale(param: str, role: str) -> float:
        c = cfg(64, param)
        group, = [g for g in make_optimizer(built(c), c).param_groups if g["role"] == role]
        return group["lr_scale"]

    assert lr_scale("mup_ssm", "ssm_B") == pytest.approx(0.25)
    assert lr_scale("mup", "ssm_B") == pytest.approx(1.0)


BAD = [
    ("headdim not dividing the width's d_inner", {"width": 18},
     "mamba2: headdim 8 does not divide d_inner 36"),
    ("headdim not dividing the base d_inner", {"model": {"mamba2": {"headdim": 12}}},
     "mamba2.headdim 12 does not divide d_inner 32"),
    ("ngroups not dividing the heads", {"model": {"mamba2": {"ngroups": 3}}},
     "mamba2.ngroups 3 does not divide"),
    ("an unknown mamba2 option", {"model": {"mamba2": {"nhead": 4}}}, "nhead"),
    ("an unknown widen", {"model": {"mamba2": {"widen": "depth"}}}, "widen"),
    ("the triton scan backend", {"model": {"scan_backend": "triton"}}, "no SSD kernel"),
]


@pytest.mark.parametrize("case,change,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_mamba2_input_is_one_line_exit_2(tmp_path, capsys, case, change, needle):
    doc = tiny_sweep("bad", {"width": [16, 32]}, model={**MAMBA2, **change.get("model", {}),
                     "mamba2": {**MAMBA2["mamba2"], **change.get("model", {}).get("mamba2", {})}})
    if "width" in change:
        doc["axes"]["width"] = [16, change["width"]]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    rc = main(["validate", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0], err
