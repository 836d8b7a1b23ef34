"""The Mamba language model: reference layout, roles, tying, numerics of the mixer."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.models.build import build_model
from mutransfer.models.checkpoint import from_reference, to_reference
from mutransfer.models.mamba import MambaMixer
from mutransfer.models.trace import tracing
from mutransfer.ops import selective_scan
from mutransfer.param.apply import assign_roles
from mutransfer.param.config import PARAMETERIZATIONS
from tests.conftest import BYTES


def small(width=32, **model):
    cfg = TrialConfig(width=width, model={"base_width": 16, "n_layer": 2, **model})
    torch.manual_seed(0)
    return build_model(cfg, BYTES)


def test_mixer_has_the_reference_shapes_and_defaults():
    mixer = MambaMixer(48, 16, d_state=16, expand=2)
    assert mixer.in_proj.weight.shape == (192, 48)
    assert mixer.conv1d.weight.shape == (96, 1, 4)
    assert mixer.dt_rank == 3  # ceil(48 / 16)
    assert mixer.x_proj_dt.weight.shape == (3, 96)
    assert mixer.x_proj_B.weight.shape == (16, 96) == mixer.x_proj_C.weight.shape
    assert mixer.dt_proj.weight.shape == (96, 3)
    dt = F.softplus(mixer.dt_proj.bias)
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 0.1 * 1.001
    assert torch.allclose(mixer.A(), -torch.arange(1.0, 17.0).expand(96, 16))
    assert torch.equal(mixer.D, torch.ones(96))


def test_mixer_forward_matches_a_direct_reimplementation():
    torch.manual_seed(1)
    mixer = MambaMixer(24, 16, d_state=5, n_layer=1, scan_backend="reference")
    h = torch.randn(2, 9, 24)
    xz = mixer.in_proj(h).transpose(1, 2)
    x, z = xz.chunk(2, dim=1)
    x = F.silu(mixer.conv1d(x)[..., :9])
    xt = x.transpose(1, 2)
    dt = F.softplus(mixer.dt_proj(mixer.x_proj_dt(xt))).transpose(1, 2)
    B, C = mixer.x_proj_B(xt).transpose(1, 2), mixer.x_proj_C(xt).transpose(1, 2)
    A = -torch.exp(mixer.A_log)
    state = torch.zeros(2, x.shape[1], 5)
    ys = []
    for t in range(9):
        state = torch.exp(dt[:, :, t, None] * A) * state + (dt[:, :, t, None] * B[:, None, :, t]
                                                            * x[:, :, t, None])
        ys.append((state * C[:, None, :, t]).sum(-1))
    y = (torch.stack(ys, -1) + x * mixer.D[:, None]) * F.silu(z)
    expected = mixer.out_proj(y.transpose(1, 2))
    assert torch.allclose(mixer(h), expected, atol=1e-5)


def reference_mamba_block(sd: dict, prefix: str, h: torch.Tensor, d_state: int,
                          d_conv: int = 4) -> torch.Tensor:
    """mamba_simple.Mamba.forward's slow path (conv1d, then selective_scan_ref), from a
    state dict in the reference layout (fused x_proj), written from state-spaces/mamba."""
    w = {k[len(prefix):]: v.double() for k, v in sd.items() if k.startswith(prefix)}
    h = h.double()
    L = h.shape[1]
    xz = torch.einsum("ed,bld->bel", w["in_proj.weight"], h)
    x, z = xz.chunk(2, dim=1)
    d_inner = x.shape[1]
    x = F.silu(F.conv1d(x, w["conv1d.weight"], w["conv1d.bias"], padding=d_conv - 1,
                        groups=d_inner)[..., :L])
    x_dbl = torch.einsum("rd,bdl->brl", w["x_proj.weight"], x)
    dt_rank = x_dbl.shape[1] - 2 * d_state
    dt, B, C = torch.split(x_dbl, [dt_rank, d_state, d_state], dim=1)
    delta = F.softplus(torch.einsum("dr,brl->bdl", w["dt_proj.weight"], dt)
                       + w["dt_proj.bias"][:, None])
    A = -torch.exp(w["A_log"])
    state = torch.zeros(h.shape[0], d_inner, d_state, dtype=torch.float64)
    ys = []
    for t in range(L):  # selective_scan_ref
        state = (torch.exp(delta[:, :, t, None] * A) * state
                 + delta[:, :, t, None] * B[:, None, :, t] * x[:, :, t, None])
        ys.append(torch.einsum("bdn,bn->bd", state, C[:, :, t]))
    y = (torch.stack(ys, -1) + x * w["D"][:, None]) * F.silu(z)
    return torch.einsum("de,bel->bld", w["out_proj.weight"], y)


@pytest.mark.parametrize("param", PARAMETERIZATIONS)
def test_the_built_mixer_is_the_reference_mamba_block_with_the_mapped_weights(param):
    cfg = TrialConfig(width=48, param={"name": param},
                      model={"base_width": 16, "n_layer": 2, "scan_backend": "reference"})
    torch.manual_seed(0)
    model = build_model(cfg, BYTES)
    sd = to_reference(model.state_dict())
    h = torch.randn(2, 11, 48)
    for i, layer in enumerate(model.layers):
        expected = reference_mamba_block(sd, f"backbone.layers.{i}.mixer.", h, d_state=16)
        with torch.no_grad():
            got = layer.mixer(h)
        assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-5), (param, i)


def test_the_forward_multiplier_of_dt_proj_scales_its_part_of_delta():
    # a parameterization's multiplier applies to dt_proj too, though its bias joins in the scan
    torch.manual_seed(1)
    mixer = MambaMixer(24, 16, d_state=5, n_layer=1, scan_backend="reference")
    h = torch.randn(2, 9, 24)
    raw = {}
    for mult in (1.0, 3.0):
        mixer.dt_proj.mult = mult
        with torch.no_grad(), tracing() as acts:
            mixer(h)
        # softplus⁻¹ of Δ, minus the bias: the projection's part
        delta = acts["layer0.delta"].double()
        raw[mult] = torch.log(torch.expm1(delta)) - mixer.dt_proj.bias.double()[:, None]
    assert torch.allclose(raw[3.0], 3.0 * raw[1.0], rtol=1e-4, atol=1e-6)


def test_every_parameter_has_exactly_one_role():
    model = small(tie_embeddings=False)
    roles = assign_roles(model)
    assert set(roles) == {n for n, _ in model.named_parameters()}
    assert roles["layers.0.mixer.x_proj_B.weight"] == "ssm_B"
    assert roles["layers.1.mixer.x_proj_C.weight"] == "ssm_C"
    assert roles["layers.0.mixer.dt_proj.bias"] == "vector"
    assert roles["lm_head.weight"] == "readout"


def test_a_parameter_without_a_role_is_an_error_that_names_it():
    model = small()
    model.layers[1].mixer.extra = nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match=r"layers\.1\.mixer\.extra"):
        assign_roles(model)


def test_readout_is_tied_to_the_embedding_by_default_and_can_be_untied():
    tied, untied = small(), small(tie_embeddings=False)
    assert tied.lm_head is None
    assert "lm_head.weight" not in dict(tied.named_parameters())
    assert untied.lm_head.weight.shape == (256, 32)
    ids = torch.randint(0, 256, (2, 5))
    with torch.no_grad():
        tied.embedding.weight[3] += 1.0
        expected = tied.norm_f(_hidden(tied, ids)) @ tied.embedding.weight.t()
        assert torch.allclose(tied(ids), expected)


def _hidden(model, ids):
    x = model.embedding(ids)
    for layer in model.layers:
        x = layer(x)
    return x


def test_reference_state_dict_round_trips_through_the_split_x_proj():
    model = small(tie_embeddings=True)
    ref = to_reference(model.state_dict())
    x_proj = ref["backbone.layers.0.mixer.x_proj.weight"]
    assert x_proj.shape == (2 + 16 + 16, 64)  # dt_rank + 2·d_state, d_inner
    assert torch.equal(x_proj[2:18], model.layers[0].mixer.x_proj_B.weight)
    assert "lm_head.weight" in ref and "backbone.norm_f.weight" in ref
    other = small(tie_embeddings=True)
    torch.manual_seed(5)
    for p in other.parameters():
        nn.init.normal_(p)
    other.load_state_dict(from_reference(ref, d_state=16))
    ids = torch.randint(0, 256, (2, 6))
    assert torch.equal(other(ids), model(ids))


def test_tracing_records_every_quantity_of_the_coordinate_check():
    model = small(scan_backend="reference")
    ids = torch.randint(0, 256, (2, 7))
    with torch.no_grad(), tracing() as acts:
        out = model(ids)
    names = {"embedding", "logits"} | {
        f"layer{i}.{q}" for i in range(2) for q in (
            "in_proj", "conv", "delta", "B", "C", "ssm_state", "ssm_state_out", "ssm_out",
            "block_out")}
    assert names <= set(acts)
    assert acts["layer0.ssm_state"].shape == (2, 64, 16, 7)
    assert torch.allclose(acts["logits"], out)
    # the traced (unfused) path computes the same function as the fused one
    assert torch.allclose(model(ids), out, atol=1e-5)


def test_the_state_contribution_is_the_output_without_the_D_skip():
    model = small(scan_backend="reference")
    ids = torch.randint(0, 256, (1, 5))
    with torch.no_grad(), tracing() as acts:
        model(ids)
    u = acts["layer0.conv"]
    assert torch.allclose(acts["layer0.ssm_out"] - u, acts["layer0.ssm_state_out"], atol=1e-6)


def test_scan_default_backend_on_cpu_matches_the_reference_in_the_model():
    ids = torch.randint(0, 256, (2, 33))
    ref, fast = small(scan_backend="reference"), small(scan_backend="auto")
    assert torch.allclose(ref(ids), fast(ids), atol=1e-4)


def test_initial_loss_of_an_lm_is_near_log_vocab():
    model = small(width=64)
    ids, targets = torch.randint(0, 256, (2, 4, 32))
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))
    assert abs(loss.item() - math.log(256)) < 0.3


def test_selective_scan_states_reproduce_the_output():
    g = torch.Generator().manual_seed(0)
    u, dt = torch.randn(2, 5, 6, generator=g), torch.rand(2, 5, 6, generator=g)
    A, B, C = -torch.rand(5, 3, generator=g), torch.randn(2, 3, 6, generator=g), torch.randn(
        2, 3, 6, generator=g)
    y, states = selective_scan(u, dt, A, B, C, return_states=True, backend="reference")
    assert torch.allclose(y, torch.einsum("bdnl,bnl->bdl", states, C), atol=1e-6)


@pytest.mark.parametrize("param", PARAMETERIZATIONS)
def test_model_embedding_std_sets_the_token_embedding_init_under_every_parameterization(param):
    for std in (0.02, 1.0):
        cfg = TrialConfig(width=128, param={"name": param},
                          model={"base_width": 64, "n_layer": 1, "embedding_std": std})
        torch.manual_seed(0)
        w = build_model(cfg, BYTES).embedding.weight
        assert w.std().item() == pytest.approx(std, rel=0.03)
