"""The optional `mamba_ssm` scan backend: a one-line error without the package, and, with a
stand-in module in its place, the arguments it hands to mamba_ssm's `selective_scan_fn`."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.errors import UserError
from mutransfer.models.build import build_model
from mutransfer.ops import mamba_ssm_scan
from mutransfer.ops.reference import selective_scan_reference
from mutransfer.ops.scan import default_backend, selective_scan
from tests.conftest import BYTES

MODULE = "mamba_ssm.ops.selective_scan_interface"


@pytest.fixture
def no_mamba_ssm(monkeypatch):
    """mamba_ssm absent, whether or not this machine has it."""
    monkeypatch.setitem(sys.modules, "mamba_ssm", None)


@pytest.fixture
def fake_mamba_ssm(monkeypatch):
    """A stand-in `mamba_ssm.ops.selective_scan_interface` that records every call and
    computes with the reference scan; CPU tensors let through as if they were on CUDA."""
    calls = []

    def selective_scan_fn(u, delta, A, B, C, D=None, z=None, delta_bias=None,
                          delta_softplus=False, return_last_state=False):
        calls.append(dict(u=u, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias,
                          delta_softplus=delta_softplus, return_last_state=return_last_state))
        return selective_scan_reference(u, delta, A, B, C, D=D, z=z, delta_bias=delta_bias,
                                        delta_softplus=delta_softplus)

    interface = types.ModuleType(MODULE)
    interface.selective_scan_fn = selective_scan_fn
    interface.selective_scan_cuda = object()  # the compiled extension is "there"
    for name, module in (("mamba_ssm", types.ModuleType("mamba_ssm")),
                         ("mamba_ssm.ops", types.ModuleType("mamba_ssm.ops")),
                         (MODULE, interface)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(mamba_ssm_scan, "check_device", lambda device: None)
    return calls


def inputs(batch=2, dim=6, n=4, L=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return dict(u=r(batch, dim, L), delta=r(batch, dim, L), A=-torch.rand(dim, n, generator=g),
                B=r(batch, n, L), C=r(batch, n, L), D=r(dim), z=r(batch, dim, L),
                delta_bias=r(dim))


def test_without_the_package_the_backend_says_how_to_install_it(no_mamba_ssm):
    x = inputs()
    with pytest.raises(UserError, match=r"MAMBA_KEEP_CUDA_BUILD=TRUE pip install .*"
                                        r"'mutransfer\[mamba\]'") as err:
        selective_scan(**x, backend="mamba_ssm")
    assert "\n" not in str(err.value)


def test_a_build_without_its_cuda_extension_is_named(monkeypatch):
    interface = types.ModuleType(MODULE)
    interface.selective_scan_fn = lambda *a, **k: None
    interface.selective_scan_cuda = None  # how mamba_ssm looks when its extension is missing
    for name in ("mamba_ssm", "mamba_ssm.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, MODULE, interface)
    with pytest.raises(UserError, match="without selective_scan_cuda"):
        mamba_ssm_scan.load_selective_scan_fn()


def test_train_with_mamba_ssm_missing_is_a_one_line_error(no_mamba_ssm, tmp_path, capsys,
                                                          monkeypatch):
    # an empty token cache: the error must come before any data is prepared (and its progress)
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "t.yaml"
    out = tmp_path / "result.json"
    path.write_text("width: 16\nmodel: {base_width: 16, n_layer: 1, d_state: 4, "
                    "scan_backend: mamba_ssm}\ntrain: {steps: 2, batch_size: 2, seq_len: 8, "
                    "eval_batches: 1}\n")
    assert main(["train", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "'mutransfer[mamba]'" in err and "MAMBA_KEEP_CUDA_BUILD" in err and "\n" not in err
    assert not out.exists()


def test_cpu_tensors_are_refused():
    with pytest.raises(UserError, match="needs CUDA tensors"):
        mamba_ssm_scan.check_device(torch.device("cpu"))


def test_arguments_reach_selective_scan_fn_unchanged(fake_mamba_ssm):
    x = inputs()
    x["A"] = x["A"].double()  # mamba_ssm wants A, D and the Δ bias in float32
    out = selective_scan(**x, delta_softplus=True, backend="mamba_ssm")
    (call,) = fake_mamba_ssm
    for name in ("u", "delta", "B", "C", "z"):
        assert call[name] is x[name], name
    for name in ("A", "D", "delta_bias"):
        assert call[name].dtype == torch.float32 and torch.equal(call[name], x[name].float())
    assert call["delta_softplus"] is True and call["return_last_state"] is False
    ref = selective_scan_reference(**x, delta_softplus=True)
    assert torch.allclose(out, ref, atol=1e-6)


def test_absent_options_stay_absent_and_states_come_from_the_reference(fake_mamba_ssm):
    x = inputs()
    out, states = selective_scan(x["u"], x["delta"], x["A"], x["B"], x["C"],
                                 return_states=True, backend="mamba_ssm")
    (call,) = fake_mamba_ssm
    assert call["D"] is None and call["z"] is None and call["delta_bias"] is None
    assert call["delta_softplus"] is False
    ref_out, ref_states = selective_scan_reference(x["u"], x["delta"], x["A"], x["B"], x["C"],
                                                   return_states=True)
    assert torch.allclose(out, ref_out) and torch.allclose(states, ref_states)


def test_the_model_built_with_scan_backend_mamba_ssm_calls_it_with_mambas_layouts(
        fake_mamba_ssm):
    """The user's path: a config naming the backend, built by build_model. mamba_ssm gets
    (batch, dim, L) u, Δ, z and (batch, n, L) B, C (views of Mamba's (batch, L, ·)
    buffers), float32 A, D, Δ bias, softplus on; the model computes what it computes with
    the reference backend."""
    def model(backend):
        cfg = TrialConfig(width=16, model={"base_width": 16, "n_layer": 1, "d_state": 4,
                                           "scan_backend": backend})
        torch.manual_seed(0)
        return build_model(cfg, BYTES)

    ids = torch.randint(0, 256, (2, 7))
    with torch.no_grad():
        out = model("mamba_ssm")(ids)
        ref = model("reference")(ids)
    (call,) = fake_mamba_ssm
    d_inner = 32
    assert call["u"].shape == call["delta"].shape == call["z"].shape == (2, d_inner, 7)
    assert call["B"].shape == call["C"].shape == (2, 4, 7)
    for name in ("A", "D", "delta_bias"):
        assert call[name].dtype == torch.float32
    assert call["delta_softplus"] is True
    assert torch.allclose(out, ref, atol=1e-5)


def test_auto_never_picks_mamba_ssm():
    assert default_backend("cpu") == "chunked"
    assert default_backend("cuda") in ("triton", "chunked")
