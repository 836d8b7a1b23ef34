"""The `chunked` selective scan computes what the `reference` oracle computes, values and grads."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mutransfer.ops import causal_conv, chunked
from mutransfer.ops.chunked import selective_scan_chunked
from mutransfer.ops.reference import selective_scan_reference
from mutransfer.ops.scan import default_backend, selective_scan

GRAD_NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative error max|a - b| / max|b|, b the reference; 0 when both are all zero."""
    a, b = a.detach().double(), b.detach().double()
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def make_inputs(batch, dim, n, length, seed=0, softplus=True, delta_max=None, a_min=-4.0):
    """Random, never-zero inputs; A negative, Δ positive (or any sign when softplus follows)."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(*shape, generator=g)

    if delta_max is not None:
        delta = uniform(delta_max / 10, delta_max, batch, dim, length)
    elif softplus:
        delta = randn(batch, dim, length)
    else:
        delta = uniform(0.01, 1.5, batch, dim, length)
    return {
        "u": randn(batch, dim, length),
        "delta": delta,
        "A": uniform(a_min, -0.05, dim, n),
        "B": randn(batch, n, length),
        "C": randn(batch, n, length),
        "D": randn(dim),
        "z": randn(batch, dim, length),
        "delta_bias": uniform(-0.5, 0.5, dim),
    }


def run_scan(fn, inputs, use, softplus, return_states=False, **kw):
    """Forward, then gradients of a random weighting of the outputs w.r.t. the used inputs."""
    leaves = {k: v.clone().requires_grad_() for k, v in inputs.items() if k in use}
    args = {k: leaves.get(k) for k in ("D", "z", "delta_bias")}
    res = fn(leaves["u"], leaves["delta"], leaves["A"], leaves["B"], leaves["C"], **args,
             delta_softplus=softplus, return_states=return_states, **kw)
    out, states = res if return_states else (res, None)
    g = torch.Generator().manual_seed(123)
    loss = (out * torch.randn(out.shape, generator=g)).sum()
    if states is not None:
        loss = loss + (states * torch.randn(states.shape, generator=g)).sum()
    grads = torch.autograd.grad(loss, list(leaves.values()))
    return out, states, dict(zip(leaves, grads))


def assert_backends_agree(inputs, use, softplus, return_states=False, fwd_tol=1e-5,
                          grad_tol=1e-4, **kw):
    ref_out, ref_states, ref_grads = run_scan(selective_scan_reference, inputs, use, softplus,
                                              return_states)
    out, states, grads = run_scan(selective_scan_chunked, inputs, use, softplus,
                                  return_states, **kw)
    assert out.shape == ref_out.shape
    assert rel_err(out, ref_out) < fwd_tol
    if return_states:
        assert states.shape == ref_states.shape and states.dtype == torch.float32
        assert rel_err(states, ref_states) < fwd_tol
    for name, ref_grad in ref_grads.items():
        assert torch.isfinite(grads[name]).all(), name
        assert rel_err(grads[name], ref_grad) < grad_tol, name


# without any of D, z, Δ bias; with each alone; with all three
OPTION_SETS = [(), ("D",), ("z",), ("delta_bias",), ("D", "z", "delta_bias")]
# channel and state sizes that are not powers of two; the long case once (the oracle is slow)
SHAPES = [(length, dim, n) for length in (1, 7, 64) for dim, n in ((5, 3), (37, 6))]
SHAPES.append((513, 37, 6))


@pytest.mark.parametrize("length,dim,n", SHAPES)
@pytest.mark.parametrize("optional", OPTION_SETS, ids=lambda o: "+".join(o) or "plain")
@pytest.mark.parametrize("softplus", [False, True], ids=["raw", "softplus"])
def test_matches_reference_across_chunks(length, dim, n, optional, softplus):
    # chunk=5 puts chunk boundaries (and a ragged last chunk) inside every L > 5
    inputs = make_inputs(2, dim, n, length, seed=length + dim, softplus=softplus)
    assert_backends_agree(inputs, ("u", "delta", "A", "B", "C") + optional, softplus, chunk=5)


@pytest.mark.parametrize("length", [1, 7, 64, 513])
def test_matches_reference_with_default_chunking(length):
    inputs = make_inputs(3, 37, 6, length, seed=7)
    assert_backends_agree(inputs, GRAD_NAMES, softplus=True)


@pytest.mark.parametrize("chunk", [1, 4, 64])
def test_states_and_their_gradients_match_reference(chunk):
    inputs = make_inputs(2, 5, 3, 64, seed=3)
    assert_backends_agree(inputs, GRAD_NAMES, softplus=True, return_states=True, chunk=chunk)


@pytest.mark.parametrize("softplus", [False, True])
def test_extreme_delta_stays_finite_and_matches(softplus):
    # Δ up to 50 with A down to -16: Δ·A reaches -800, exp underflows to 0 in both backends
    inputs = make_inputs(2, 37, 6, 64, seed=11, delta_max=50.0, a_min=-16.0)
    out, _, grads = run_scan(selective_scan_chunked, inputs, GRAD_NAMES, softplus, chunk=8)
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert_backends_agree(inputs, GRAD_NAMES, softplus, chunk=8)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-5), (torch.bfloat16, 1e-2)])
def test_output_dtype_follows_u_and_states_stay_float32(dtype, tol):
    inputs = {k: v.to(dtype) for k, v in make_inputs(2, 5, 3, 16, seed=5).items()}
    out, states = selective_scan_chunked(
        inputs["u"], inputs["delta"], inputs["A"], inputs["B"], inputs["C"], D=inputs["D"],
        z=inputs["z"], delta_softplus=True, return_states=True)
    ref = selective_scan_reference(inputs["u"], inputs["delta"], inputs["A"], inputs["B"],
                                   inputs["C"], D=inputs["D"], z=inputs["z"], delta_softplus=True)
    assert out.dtype == dtype and states.dtype == torch.float32
    assert rel_err(out, ref) < tol  # both compute in float32; bf16 rounds the output only


@pytest.mark.parametrize("layout", ["batch_time_channel", "time_major"])
def test_strided_inputs_give_the_same_result(layout):
    inputs = make_inputs(2, 37, 6, 40, seed=9)
    dense = selective_scan_chunked(inputs["u"], inputs["delta"], inputs["A"], inputs["B"],
                                   inputs["C"], z=inputs["z"], delta_softplus=True, chunk=7)
    # the same values stored (batch, L, c) as linear layers emit them, or (L, batch, c)
    order = (0, 2, 1) if layout == "batch_time_channel" else (2, 0, 1)
    inverse = [order.index(i) for i in range(3)]
    strided = {k: inputs[k].permute(order).contiguous().permute(inverse)
               for k in ("u", "delta", "B", "C", "z")}
    out = selective_scan_chunked(strided["u"], strided["delta"], inputs["A"], strided["B"],
                                 strided["C"], z=strided["z"], delta_softplus=True, chunk=7)
    assert not strided["u"].is_contiguous()
    assert rel_err(out, dense) < 1e-6  # elementwise kernels may round the last bit differently


def test_backward_keeps_no_state_sized_tensor():
    batch, dim, n, length = 2, 32, 16, 256
    inputs = make_inputs(batch, dim, n, length, seed=2)
    leaves = {k: inputs[k].requires_grad_() for k in ("u", "delta", "A", "B", "C")}
    out = selective_scan_chunked(**leaves, chunk=16)
    saved = sum(t.numel() for t in out.grad_fn.saved_tensors)
    # inputs-sized tensors plus one state per chunk, far below one (batch, dim, n, L) tensor
    assert saved < batch * dim * n * length / 2


def test_chunk_must_be_positive():
    inputs = make_inputs(1, 3, 2, 4)
    with pytest.raises(ValueError, match="chunk"):
        selective_scan_chunked(inputs["u"], inputs["delta"], inputs["A"], inputs["B"],
                               inputs["C"], chunk=0)


def test_dispatcher_reaches_chunked(monkeypatch):
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return selective_scan_chunked(*args, **kwargs)

    monkeypatch.setattr(chunked, "selective_scan_chunked", spy)
    inputs = make_inputs(2, 5, 3, 9, seed=4)
    out = selective_scan(inputs["u"], inputs["delta"], inputs["A"], inputs["B"], inputs["C"],
                         D=inputs["D"], delta_softplus=True, backend="chunked")
    assert len(calls) == 1 and calls[0]["delta_softplus"] is True
    ref = selective_scan_reference(inputs["u"], inputs["delta"], inputs["A"], inputs["B"],
                                   inputs["C"], D=inputs["D"], delta_softplus=True)
    assert rel_err(out, ref) < 1e-5


def test_chunked_is_the_cpu_default():
    assert default_backend("cpu") == "chunked"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the doctor's choice may stand on a GPU")
def test_cuda_default_is_triton_only_where_it_compiles(monkeypatch):
    """With no choice of the doctor's, `auto` on CUDA runs triton when it can compile the
    kernels (3.4 on) and the chunked scan otherwise (torch 2.7 ships triton 3.3)."""
    triton = pytest.importorskip("triton")
    monkeypatch.setattr(triton, "__version__", "3.3.1")
    assert default_backend("cuda") == "chunked"
    monkeypatch.setattr(triton, "__version__", "3.4.0")
    assert default_backend("cuda") == "triton"


def test_unknown_backend_is_named_in_the_error():
    inputs = make_inputs(1, 3, 2, 4)
    with pytest.raises(ValueError, match="no_such_scan"):
        selective_scan(inputs["u"], inputs["delta"], inputs["A"], inputs["B"], inputs["C"],
                       backend="no_such_scan")


def test_the_conv_runs_triton_on_cuda_only_where_it_compiles(monkeypatch):
    """The causal conv's triton kernels follow the scan's floor: torch 2.3's triton 2.3
    rejects their tl.arange, so CUDA tensors then take torch's conv1d."""
    triton = pytest.importorskip("triton")
    cuda_tensor = SimpleNamespace(is_cuda=True)
    monkeypatch.setattr(triton, "__version__", "2.3.1")
    assert not causal_conv.use_triton(cuda_tensor)
    monkeypatch.setattr(triton, "__version__", "3.4.0")
    assert causal_conv.use_triton(cuda_tensor)
