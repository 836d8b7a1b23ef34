"""The `triton` scan backend agrees with the `reference` backend, forward and every gradient.

Without CUDA the kernels run under the Triton interpreter (TRITON_INTERPRET=1, set here before
anything builds them) at tiny shapes; with CUDA the same tests run compiled, plus full shapes.
"""

import importlib
import os
import subprocess
import sys

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are decorated
pytest.importorskip("triton")

import numpy as np  # noqa: E402

from mutransfer.errors import UserError  # noqa: E402
from mutransfer.ops import triton_scan  # noqa: E402
from mutransfer.ops.reference import selective_scan_reference  # noqa: E402
from mutransfer.ops.scan import selective_scan  # noqa: E402
from mutransfer.ops.triton_scan import ScanConfig, selective_scan_triton  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"
_kernels = triton_scan.load_kernels()
if not HAS_CUDA and not triton_scan.kernels_interpreted(_kernels):
    importlib.reload(_kernels)  # imported earlier without TRITON_INTERPRET: rebuild

ALL = dict(D=True, z=True, delta_bias=True, delta_softplus=True)
NONE = dict(D=False, z=False, delta_bias=False, delta_softplus=False)
# chunk 16 with L = 37: three chunks, the last one partial; fwd and bwd block sizes differ
SMALL = dict(batch=2, dim=5, n=3, L=37)
SMALL_CFG = ScanConfig(chunk=16, fwd_block_d=8, bwd_block_d=4)
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2}


def _vector_scan(self, inputs):
    """Triton's interpreter scan (a left fold along the axis), vectorised over other axes."""
    dtypes = [x.dtype for x in inputs]
    data = [np.moveaxis(x.handle.data, self.axis, 0) for x in inputs]
    out = [np.empty_like(d) for d in data]
    for o, d in zip(out, data):
        o[0] = d[0]
    for i in range(1, data[0].shape[0]):
        acc = [self.to_tensor(o[i - 1], dt) for o, dt in zip(out, dtypes)]
        cur = [self.to_tensor(d[i], dt) for d, dt in zip(data, dtypes)]
        ret = self.combine_fn.fn(*acc, *cur)
        for o, r in zip(out, ret if isinstance(ret, tuple) else (ret,)):
            o[i] = np.reshape(r.handle.data, o[i].shape)
    return [self.to_tensor(np.ascontiguousarray(np.moveaxis(o, 0, self.axis)), dt)
            for o, dt in zip(out, dtypes)]


@pytest.fixture
def fast_scan(monkeypatch):
    """The interpreter runs a scan one element per Python call; fold whole slices instead
    (same order of operations, ~3x faster tests). `test_interpreter_own_scan` runs without."""
    interp = sys.modules.get("triton.runtime.interpreter")
    if not HAS_CUDA and interp is not None and hasattr(interp, "ScanOps"):
        monkeypatch.setattr(interp.ScanOps, "generic_scan", _vector_scan)


def make_inputs(batch, dim, n, L, dtype=torch.float32, seed=0, D=True, z=True,
                delta_bias=True, delta_softplus=True):
    """Random leaves (never zeros) shaped as selective_scan_ref; Δ positive without softplus."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0, shift=0.0):
        return torch.randn(*shape, generator=g) * scale + shift

    raw_delta = rnd(batch, dim, L, scale=0.5, shift=-1.0) if delta_softplus else \
        torch.rand(batch, dim, L, generator=g) * 0.4 + 0.05
    x = dict(u=rnd(batch, dim, L), delta=raw_delta,
             A=-(0.5 + 2 * torch.rand(dim, n, generator=g)),
             B=rnd(batch, n, L), C=rnd(batch, n, L),
             D=rnd(dim) if D else None, z=rnd(batch, dim, L) if z else None,
             delta_bias=rnd(dim, scale=0.3) if delta_bias else None)
    low = {"u", "delta", "B", "C", "z"}  # the activations come in the input dtype
    x = {k: None if v is None else
         (v.to(dtype) if k in low else v).to(DEVICE).requires_grad_()
         for k, v in x.items()}
    dout = rnd(batch, dim, L).to(DEVICE, dtype)
    return x, dict(delta_softplus=delta_softplus), dout


def run(fn, x, opts, dout, **kwargs):
    """Output and the gradient of <out, dout> for every input present."""
    out = fn(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
             delta_bias=x["delta_bias"], **opts, **kwargs)
    leaves = {k: v for k, v in x.items() if v is not None}
    grads = torch.autograd.grad(out, list(leaves.values()), dout)
    return out, dict(zip(leaves, grads))


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def assert_matches_reference(shape, options, dtype=torch.float32, config=SMALL_CFG, seed=0):
    x, opts, dout = make_inputs(**shape, dtype=dtype, seed=seed, **options)
    out, grads = run(selective_scan_triton, x, opts, dout, config=config)
    ref_out, ref_grads = run(selective_scan_reference, x, opts, dout)
    assert out.dtype == dtype and out.shape == ref_out.shape
    errors = {"out": rel_err(out, ref_out)}
    for name, ref in ref_grads.items():
        assert grads[name].dtype == ref.dtype and grads[name].shape == ref.shape, name
        errors[name] = rel_err(grads[name], ref)
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOL[dtype], f"{worst}: {errors}"


@pytest.mark.parametrize("options", [
    ALL, NONE,
    dict(D=True, z=False, delta_bias=False, delta_softplus=True),
    dict(D=False, z=True, delta_bias=True, delta_softplus=False),
], ids=["all", "none", "D-softplus", "z-bias"])
def test_float32_matches_reference(options, fast_scan):
    assert_matches_reference(SMALL, options)


def test_bfloat16_inputs_match_reference(fast_scan):
    assert_matches_reference(SMALL, ALL, dtype=torch.bfloat16, seed=1)


def test_more_channels_and_states_than_one_block(fast_scan):
    """dim 12 over blocks of 8, n = 6 padded to 8, L = 70 over chunks of 32."""
    config = ScanConfig(chunk=32, fwd_block_d=8, bwd_block_d=8)
    assert_matches_reference(dict(batch=2, dim=12, n=6, L=70), ALL, config=config, seed=2)


def test_sequence_shorter_than_one_chunk(fast_scan):
    assert_matches_reference(dict(batch=1, dim=3, n=4, L=11), ALL,
                             config=ScanConfig(chunk=16, fwd_block_d=4, bwd_block_d=4))


def test_reverse_scan_by_flip_matches_reference(fast_scan):
    config = ScanConfig(chunk=8, fwd_block_d=4, bwd_block_d=4, reverse_by_flip=True)
    assert_matches_reference(dict(batch=1, dim=3, n=2, L=19), ALL, config=config, seed=3)


def test_interpreter_own_scan():
    """Triton's own interpreter scan (no `fast_scan`) gives the same answers."""
    config = ScanConfig(chunk=8, fwd_block_d=4, bwd_block_d=4)
    assert_matches_reference(dict(batch=1, dim=3, n=2, L=19), ALL, config=config, seed=4)


def test_dispatcher_runs_the_triton_backend(fast_scan):
    x, opts, _ = make_inputs(**SMALL, **ALL)
    args = (x["u"], x["delta"], x["A"], x["B"], x["C"])
    kw = dict(D=x["D"], z=x["z"], delta_bias=x["delta_bias"], **opts)
    with torch.no_grad():
        via_dispatch = selective_scan(*args, **kw, backend="triton")
        ref = selective_scan_reference(*args, **kw)
    assert rel_err(via_dispatch, ref) < 1e-5


def test_return_states_gives_every_state(fast_scan):
    x, opts, _ = make_inputs(**SMALL, **ALL)
    args = (x["u"], x["delta"], x["A"], x["B"], x["C"])
    kw = dict(D=x["D"], z=x["z"], delta_bias=x["delta_bias"], **opts, return_states=True)
    with torch.no_grad():
        out, states = selective_scan_triton(*args, **kw, config=SMALL_CFG)
        ref_out, ref_states = selective_scan_reference(*args, **kw)
    assert states.shape == (2, 5, 3, 37) and states.dtype == torch.float32
    assert rel_err(out, ref_out) < 1e-5 and rel_err(states, ref_states) < 1e-5


def test_saves_chunk_checkpoints_not_every_state(fast_scan):
    """Beyond its inputs, autograd keeps one float32 state per chunk: (b, d, ceil(L/c), n)."""
    x, opts, _ = make_inputs(**SMALL, **ALL)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
                              delta_bias=x["delta_bias"], **opts, config=SMALL_CFG)
    input_ptrs = {v.data_ptr() for v in x.values()}
    extra = sum(t.numel() for t in saved if t.data_ptr() not in input_ptrs)
    b, d, n, L = SMALL["batch"], SMALL["dim"], SMALL["n"], SMALL["L"]
    assert extra == b * d * -(-L // SMALL_CFG.chunk) * n
    assert extra < b * d * n * L / 4


def test_compiled_kernels_need_cuda_tensors():
    with pytest.raises(UserError, match="TRITON_INTERPRET=1"):
        triton_scan.check_device(torch.device("cpu"), interpreted=False)
    triton_scan.check_device(torch.device("cpu"), interpreted=True)
    triton_scan.check_device(torch.device("cuda", 0), interpreted=False)


def test_missing_triton_is_a_user_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # makes `import triton` fail
    monkeypatch.delitem(sys.modules, "mutransfer.ops.triton_kernels")
    with pytest.raises(UserError, match="chunked"):
        triton_scan.load_kernels()


def test_mismatched_shapes_are_rejected():
    x, opts, _ = make_inputs(**SMALL, **NONE)
    with pytest.raises(ValueError, match="B must be"):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["C"][:, :2], x["C"])
    with pytest.raises(ValueError, match="D must be"):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["A"][0])


def test_config_sizes_must_be_powers_of_two():
    with pytest.raises(ValueError, match="chunk"):
        ScanConfig(chunk=48)


def _has_nvidia_backend() -> bool:
    import triton.backends

    return "nvidia" in getattr(triton.backends, "backends", {})


@pytest.mark.slow
@pytest.mark.skipif(not _has_nvidia_backend(), reason="triton build without the CUDA backend")
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_kernels_compile_for_hopper(dtype):
    """What the interpreter cannot check: the compiler accepts both kernels for sm_90 (no GPU
    needed; a fresh process, since this one builds interpreted kernels)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-m", "mutransfer.ops.triton_compile_check", "--arch", "90",
         "--dtype", dtype], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "scan_fwd_kernel: sm_90 cubin" in done.stdout
    assert "scan_bwd_kernel: sm_90 cubin" in done.stdout


FULL = dict(batch=2, dim=1536, n=16, L=1000)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("options", [ALL, NONE], ids=["all", "none"])
@pytest.mark.parametrize("reverse_by_flip", [False, True], ids=["reverse", "flip"])
def test_full_shapes_on_gpu(dtype, options, reverse_by_flip, monkeypatch):
    """Default launch sizes; L = 1000 is not a multiple of the chunk."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # true fp32 reference
    config = ScanConfig(reverse_by_flip=reverse_by_flip)
    assert_matches_reference(FULL, options, dtype=dtype, config=config, seed=5)
