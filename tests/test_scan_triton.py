"""The `triton` scan backend agrees with the `reference` backend, forward and every gradient.

Without CUDA the kernels run under the Triton interpreter (TRITON_INTERPRET=1, set here before
anything builds them) at tiny shapes; with CUDA the same tests run compiled, plus full shapes.
"""

import importlib
import itertools
import os
import subprocess
import sys

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are decorated
pytest.importorskip("triton")
from mutransfer.ops.backends import triton_problem  # noqa: E402

TRITON_PROBLEM = triton_problem()  # a triton too old for the kernels (torch < 2.8 pins one)
if TRITON_PROBLEM:
    pytest.skip(TRITON_PROBLEM, allow_module_level=True)

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from mutransfer.errors import UserError  # noqa: E402
from mutransfer.ops import triton_scan  # noqa: E402
from mutransfer.ops.reference import selective_scan_reference  # noqa: E402
from mutransfer.ops.scan import selective_scan  # noqa: E402
from mutransfer.ops.triton_scan import ScanConfig, selective_scan_triton  # noqa: E402

DEVICE = "cuda" if HAS_CUDA else "cpu"
_kernels = triton_scan.load_kernels()
if not HAS_CUDA and not triton_scan.kernels_interpreted(_kernels):
    importlib.reload(_kernels)  # imported earlier without TRITON_INTERPRET: rebuild


@triton.jit
def _loop_to_program_id(out_ptr):
    """A loop bound by a run-time value, as the kernels' segment loops are."""
    total = 0
    for _ in range(tl.program_id(0)):
        total += 1
    tl.store(out_ptr + tl.program_id(0), total)


def _interpreter_problem() -> str:
    """Why the interpreter cannot run the kernels here, or '' (always '' with CUDA: compiled).
    triton 3.4-3.6's interpreter turns a run-time loop bound into an int by int() of a
    one-element array, which numpy 2.4 refuses; later triton does not."""
    if HAS_CUDA:
        return ""
    try:
        _loop_to_program_id[(2,)](torch.zeros(2))
    except Exception as exc:  # the interpreter's own failure, whatever its type
        return (f"triton {triton.__version__}'s interpreter cannot run a loop to a run-time "
                f"bound with numpy {np.__version__} ({str(exc).splitlines()[0][:120]})")
    return ""


INTERPRETER_PROBLEM = _interpreter_problem()
runs_kernels = pytest.mark.skipif(bool(INTERPRETER_PROBLEM), reason=INTERPRETER_PROBLEM)

ALL = dict(D=True, z=True, delta_bias=True, delta_softplus=True)
NONE = dict(D=False, z=False, delta_bias=False, delta_softplus=False)
# L = 37: three forward chunks of 16 and five backward chunks of 8 (the last ones partial),
# checkpoint intervals of 16 steps; the forward's channel blocks are smaller than dim
SMALL = dict(batch=2, dim=5, n=3, L=37)
SMALL_CFG = ScanConfig(chunk=16, bwd_chunk=8, ckpt_steps=16, fwd_block_d=4, bwd_block_d=32)
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


def _vector_reduce(self, inputs):
    """Triton's interpreter reduce with a combine function (a left fold along the axis, as
    `tl.flip` uses for its swaps), vectorised over the other axes."""
    original_axis, ndim = self.axis, inputs[0].handle.data.ndim
    inputs, axis = self.unravel(inputs, self.axis)
    dtypes = [x.dtype for x in inputs]
    data = [np.moveaxis(x.handle.data, axis, 0) for x in inputs]
    acc = [d[0].copy() for d in data]
    for i in range(1, data[0].shape[0]):
        ret = self.combine_fn.fn(*(self.to_tensor(a, dt) for a, dt in zip(acc, dtypes)),
                                 *(self.to_tensor(d[i], dt) for d, dt in zip(data, dtypes)))
        acc = [np.reshape(r.handle.data, np.shape(a)).astype(a.dtype)
               for a, r in zip(acc, ret if isinstance(ret, tuple) else (ret,))]
    out = []
    for a, dt in zip(acc, dtypes):
        if self.keep_dims:
            a = np.expand_dims(a, axis) if original_axis is not None else a.reshape([1] * ndim)
        elif original_axis is None:
            a = a.item()
        out.append(self.to_tensor(a, dt))
    return out


@pytest.fixture
def fast_scan(monkeypatch):
    """The interpreter runs a scan or a reduce with a combine function one element per
    Python call; fold whole slices instead (same order of operations, several times faster
    tests). `test_interpreter_own_scan` runs without."""
    interp = sys.modules.get("triton.runtime.interpreter")
    if not HAS_CUDA and interp is not None and hasattr(interp, "ScanOps"):
        monkeypatch.setattr(interp.ScanOps, "generic_scan", _vector_scan)
        monkeypatch.setattr(interp.ReduceOps, "generic_reduce", _vector_reduce)


def make_inputs(batch, dim, n, L, dtype=torch.float32, seed=0, D=True, z=True,
                delta_bias=True, delta_softplus=True, channels_last=False):
    """Random leaves (never zeros) shaped as selective_scan_ref; Δ positive without softplus.

    channels_last: u, Δ, z, B, C and dout are transposed views of (batch, L, ·) buffers, as
    Mamba's projections make them, z the second half of a (batch, L, 2 dim) one."""
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
    x = {k: None if v is None else (v.to(dtype) if k in low else v).to(DEVICE)
         for k, v in x.items()}
    dout = rnd(batch, dim, L).to(DEVICE, dtype)
    if channels_last:
        x.update({k: _time_major_view(x[k]) for k in ("u", "delta", "B", "C")})
        if z:
            x["z"] = torch.cat([torch.zeros_like(x["z"]), x["z"]], 1).transpose(1, 2) \
                .contiguous()[..., dim:].transpose(1, 2)
        dout = _time_major_view(dout)
    x = {k: None if v is None else v.requires_grad_() for k, v in x.items()}
    return x, dict(delta_softplus=delta_softplus), dout


def _time_major_view(t):
    """The same values as a (batch, ·, L) view of a contiguous (batch, L, ·) tensor."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def run(fn, x, opts, dout, **kwargs):
    """Output and the gradient of <out, dout> for every input present."""
    out = fn(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
             delta_bias=x["delta_bias"], **opts, **kwargs)
    leaves = {k: v for k, v in x.items() if v is not None}
    grads = torch.autograd.grad(out, list(leaves.values()), dout)
    return out, dict(zip(leaves, grads))


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def assert_matches_reference(shape, options, dtype=torch.float32, config=SMALL_CFG, seed=0,
                             channels_last=False):
    x, opts, dout = make_inputs(**shape, dtype=dtype, seed=seed, channels_last=channels_last,
                                **options)
    out, grads = run(selective_scan_triton, x, opts, dout, config=config)
    ref_out, ref_grads = run(selective_scan_reference, x, opts, dout)
    assert out.dtype == dtype and out.shape == ref_out.shape
    errors = {"out": rel_err(out, ref_out)}
    for name, ref in ref_grads.items():
        assert grads[name].dtype == ref.dtype and grads[name].shape == ref.shape, name
        errors[name] = rel_err(grads[name], ref)
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOL[dtype], f"{worst}: {errors}"
    return x, out, grads


@runs_kernels
@pytest.mark.parametrize("options", [
    ALL, NONE,
    dict(D=True, z=False, delta_bias=False, delta_softplus=True),
    dict(D=False, z=True, delta_bias=True, delta_softplus=False),
], ids=["all", "none", "D-softplus", "z-bias"])
def test_float32_matches_reference(options, fast_scan):
    assert_matches_reference(SMALL, options)


@runs_kernels
def test_bfloat16_inputs_match_reference(fast_scan):
    assert_matches_reference(SMALL, ALL, dtype=torch.bfloat16, seed=1)


@runs_kernels
def test_more_channels_than_one_block(fast_scan):
    """dim 40: two backward programs of 32 channels, forward blocks of 64 channels over one
    warp (two per thread); L = 40 over chunks of 16."""
    config = ScanConfig(chunk=16, bwd_chunk=16, ckpt_steps=32, fwd_block_d=64, bwd_block_d=32)
    assert_matches_reference(dict(batch=1, dim=40, n=2, L=40), ALL, config=config, seed=2)


@runs_kernels
def test_sequence_shorter_than_one_chunk(fast_scan):
    assert_matches_reference(dict(batch=1, dim=3, n=4, L=11), ALL,
                             config=ScanConfig(chunk=16, fwd_block_d=4))


@runs_kernels
def test_time_segments_in_parallel_match_reference(fast_scan):
    """Forward in 3 segments, backward in 2, over 5 checkpoint intervals (the last partial):
    segment starts and adjoint carries composed across segments; one step per backward
    chunk (the lane sums of a single step)."""
    config = ScanConfig(chunk=4, bwd_chunk=1, ckpt_steps=8, fwd_block_d=4,
                        fwd_segments=3, bwd_segments=2)
    assert_matches_reference(dict(batch=2, dim=3, n=2, L=37), ALL, config=config, seed=3)


@runs_kernels
def test_interpreter_own_scan():
    """Triton's own interpreter scan (no `fast_scan`) gives the same answers."""
    config = ScanConfig(chunk=8, bwd_chunk=4, ckpt_steps=8, fwd_block_d=4)
    assert_matches_reference(dict(batch=1, dim=3, n=2, L=19), ALL, config=config, seed=4)


@runs_kernels
def test_reads_and_writes_the_projections_layout_in_place(fast_scan):
    """(batch, L, ·) buffers passed as transposed views: no copy of u, Δ or z is saved, and
    out and every gradient of them come back in the same dimension order."""
    x, out, grads = assert_matches_reference(SMALL, ALL, channels_last=True, seed=5)
    assert out.transpose(1, 2).is_contiguous()
    for name in ("u", "delta", "z"):
        assert not x[name].is_contiguous()
        assert grads[name].transpose(1, 2).is_contiguous(), name
    out = selective_scan_triton(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
                                delta_bias=x["delta_bias"], delta_softplus=True,
                                config=SMALL_CFG)
    saved = {t.data_ptr() for t in out.grad_fn.saved_tensors}
    assert {x[name].data_ptr() for name in ("u", "delta", "z")} <= saved


@runs_kernels
def test_the_model_as_built_trains_the_same_with_triton_as_with_the_reference(fast_scan,
                                                                           monkeypatch):
    """The user's path on CUDA: build_model with scan_backend triton (Mamba's (batch, L, ·)
    views into the kernels) and the triton causal conv, forward and every parameter's
    gradient against the reference backend and PyTorch's conv1d."""
    from mutransfer.config import TrialConfig
    from mutransfer.models.build import build_model
    from mutransfer.ops import causal_conv
    from tests.conftest import BYTES

    real_use_triton = causal_conv.use_triton

    def model(backend):
        cfg = TrialConfig(width=16, model={"base_width": 16, "n_layer": 1, "d_state": 4,
                                           "scan_backend": backend})
        torch.manual_seed(0)
        return build_model(cfg, BYTES).to(DEVICE)

    ids = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(1)).to(DEVICE)
    grads = {}
    for backend in ("triton", "reference"):
        # the triton conv for the triton run (on the CPU: interpreted), torch's for the other
        monkeypatch.setattr(causal_conv, "use_triton",
                            (lambda x: True) if backend == "triton" else real_use_triton)
        m = model(backend)
        logits = m(ids)
        logits.square().mean().backward()
        grads[backend] = (logits, {n: p.grad for n, p in m.named_parameters()})
    (out, g), (ref_out, ref_g) = grads["triton"], grads["reference"]
    assert rel_err(out, ref_out) < 1e-5
    for name, ref in ref_g.items():
        assert rel_err(g[name], ref) < 1e-4, name


@runs_kernels
def test_dispatcher_runs_the_triton_backend(fast_scan):
    x, opts, _ = make_inputs(**SMALL, **ALL)
    args = (x["u"], x["delta"], x["A"], x["B"], x["C"])
    kw = dict(D=x["D"], z=x["z"], delta_bias=x["delta_bias"], **opts)
    with torch.no_grad():
        via_dispatch = selective_scan(*args, **kw, backend="triton")
        ref = selective_scan_reference(*args, **kw)
    assert rel_err(via_dispatch, ref) < 1e-5


@runs_kernels
def test_return_states_gives_every_state(fast_scan):
    x, opts, _ = make_inputs(**SMALL, **ALL)
    args = (x["u"], x["delta"], x["A"], x["B"], x["C"])
    kw = dict(D=x["D"], z=x["z"], delta_bias=x["delta_bias"], **opts, return_states=True)
    with torch.no_grad():
        out, states = selective_scan_triton(*args, **kw, config=SMALL_CFG)
        ref_out, ref_states = selective_scan_reference(*args, **kw)
    assert states.shape == (2, 5, 3, 37) and states.dtype == torch.float32
    assert rel_err(out, ref_out) < 1e-5 and rel_err(states, ref_states) < 1e-5


@runs_kernels
def test_saves_interval_checkpoints_not_every_state(fast_scan):
    """Beyond its inputs, autograd keeps one float32 state per checkpoint interval but the
    last, (b, ceil(L/interval) - 1, n, d), and B, C as float32 padded to whole chunks."""
    x, opts, _ = make_inputs(**SMALL, **ALL)
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
                              delta_bias=x["delta_bias"], **opts, config=SMALL_CFG)
    input_ptrs = {v.data_ptr() for v in x.values()}
    b, d, n, L = SMALL["batch"], SMALL["dim"], SMALL["n"], SMALL["L"]
    extra = {tuple(t.shape) for t in saved if t.data_ptr() not in input_ptrs and t.dim() > 2}
    L_pad = 48  # whole forward chunks of 16
    assert extra == {(b, -(-L // SMALL_CFG.ckpt_steps) - 1, n, d), (b, n, L_pad)}


def test_segments_cover_whole_intervals_and_fill_the_gpu():
    """The automatic split: enough programs, whole checkpoint intervals per segment, and the
    per-segment buffers capped at half an activation."""
    config = ScanConfig()
    p = triton_scan.plan(batch=8, dim=1536, n=16, L=4096, act_bytes=2, config=config)
    for walk, block in ((p.fwd, config.fwd_block_d), (p.bwd, config.bwd_block_d)):
        assert walk.seg_chunks % walk.ckpt_chunks == 0
        assert walk.count * walk.seg_chunks >= walk.n_chunks > (walk.count - 1) * walk.seg_chunks
        assert walk.count * 8 * 1536 // block >= config.target_programs
    short = triton_scan.plan(batch=8, dim=1536, n=16, L=1024, act_bytes=2, config=config)
    # backward: ckpt_steps / bwd_chunk + 3 float32 states per channel and segment
    assert short.bwd.count * (4 + 3) * 16 * 4 <= 2 * 1024 / 2
    single = triton_scan.plan(batch=64, dim=4096, n=16, L=1024, act_bytes=2, config=config)
    assert single.fwd.count == single.bwd.count == 1
    forced = ScanConfig(fwd_segments=3, bwd_segments=100)
    p = triton_scan.plan(batch=1, dim=32, n=4, L=1000, act_bytes=2, config=forced)
    assert p.fwd.count == 3 and p.bwd.count == -(-1000 // forced.ckpt_steps)


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


def test_a_triton_too_old_to_compile_the_kernels_is_a_user_error(monkeypatch):
    """triton 3.3 (torch 2.7's) rejects the adjoint's tl.flip along time at compile time,
    deep inside a training step; the backend says so before it starts."""
    monkeypatch.setattr(triton, "__version__", "3.3.1")
    with pytest.raises(UserError, match=r"triton 3\.3\.1 .*triton>=3\.4.*'chunked'"):
        triton_scan.load_kernels()
    monkeypatch.setattr(triton, "__version__", "3.4.0")
    assert triton_scan.load_kernels() is not None


def test_mismatched_shapes_are_rejected():
    x, opts, _ = make_inputs(**SMALL, **NONE)
    with pytest.raises(ValueError, match="B must be"):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["C"][:, :2], x["C"])
    with pytest.raises(ValueError, match="D must be"):
        selective_scan_triton(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["A"][0])


@pytest.mark.parametrize("bad,match", [
    (dict(chunk=48), "chunk must be a power of two"),
    (dict(bwd_chunk=64), "bwd_chunk must be at most 32"),
    (dict(chunk=16, ckpt_steps=8), "ckpt_steps"),
    (dict(bwd_block_d=16), "bwd_block_d must be a multiple of 32"),
    (dict(fwd_segments=0), "fwd_segments must be at least 1"),
])
def test_config_sizes_are_checked(bad, match):
    with pytest.raises(ValueError, match=match):
        ScanConfig(**bad)


def _has_nvidia_backend() -> bool:
    import triton.backends

    return "nvidia" in getattr(triton.backends, "backends", {})


HOPPER_DTYPES = ["bf16", "fp32"]
# A second triton to compile with, beside the installed one: a folder holding another
# version's package (.ci/run puts the GPU machine's, 3.6, there). Layouts are the compiler's
# choice and differ between versions: 3.4-3.6 laid time over the lanes until the tile offsets
# named channels contiguous (triton_kernels._channels), and 3.9 never did.
ALT_TRITON = os.environ.get("MUTRANSFER_TRITON_ALT", "")
TRITONS = ["installed", pytest.param("alt", marks=pytest.mark.skipif(
    not ALT_TRITON, reason="MUTRANSFER_TRITON_ALT names no second triton"))]


@pytest.fixture(scope="module")
def hopper_compiles(tmp_path_factory):
    """`triton_compile_check --arch 90` of each dtype (and each triton), all started at once:
    each is a fresh process (this one builds interpreted kernels) whose compiler runs on one
    core, so on a machine of two cores or more they run side by side.
    (triton, dtype) -> (process, stdout, stderr)."""
    folder = tmp_path_factory.mktemp("hopper")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    envs = {"installed": env}
    if ALT_TRITON:
        envs["alt"] = dict(env, PYTHONPATH=os.pathsep.join(
            p for p in (ALT_TRITON, env.get("PYTHONPATH", "")) if p))
    runs = {}
    for (which, run_env), dtype in itertools.product(envs.items(), HOPPER_DTYPES):
        out, err = folder / f"{which}-{dtype}.out", folder / f"{which}-{dtype}.err"
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen([sys.executable, "-m", "mutransfer.ops.triton_compile_check",
                                     "--arch", "90", "--dtype", dtype], stdout=o, stderr=e,
                                    env=run_env)
        runs[which, dtype] = (proc, out, err)
    yield runs
    for proc, _, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
@pytest.mark.skipif(not _has_nvidia_backend(), reason="triton build without the CUDA backend")
@pytest.mark.parametrize("dtype", HOPPER_DTYPES)
@pytest.mark.parametrize("which", TRITONS)
def test_kernels_compile_for_hopper_with_lane_local_state_loops(which, dtype, hopper_compiles):
    """What the interpreter cannot check: the compiler accepts every kernel for sm_90 (no GPU
    needed; a fresh process, since this one builds interpreted kernels), and at the default
    launch sizes none uses shared memory, none spills inside its loop over state indices (the
    design's point; the backward spills a few values per chunk outside it), and the state
    loops of the forward and of the backward's carry exchange nothing between lanes (each
    thread holds whole columns of time: no warp shuffle)."""
    proc, out, err = hopper_compiles[which, dtype]
    assert proc.wait(timeout=300) == 0, err.read_text()[-2000:]
    lines = out.read_text().splitlines()
    heads = [i for i, ln in enumerate(lines) if ": sm_90 cubin" in ln]
    assert [lines[i].split(":")[0] for i in heads] == [
        "scan_fwd_kernel", "scan_fwd_kernel[ENDS_ONLY]", "scan_bwd_carry_kernel",
        "scan_bwd_kernel", "conv_silu_fwd_kernel", "conv_silu_bwd_pre_kernel",
        "conv_bwd_dx_kernel"]
    for i in heads[:4]:
        assert lines[i].endswith("shared bytes 0"), lines[i]
        state_loop = lines[i + 1]
        assert "state loop, per element" in state_loop and "exp2 1.00" in state_loop
        assert "local" not in state_loop and "shared" not in state_loop, state_loop
    for i in heads[:3]:
        assert "shuffle" not in lines[i + 1], lines[i] + "\n" + lines[i + 1]


FULL = dict(batch=2, dim=1536, n=16, L=1000)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("options", [ALL, NONE], ids=["all", "none"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["bdl", "bld"])
def test_full_shapes_on_gpu(dtype, options, channels_last, monkeypatch):
    """Default launch sizes; L = 1000 is not a multiple of a chunk or interval."""
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # true fp32 reference
    assert_matches_reference(FULL, options, dtype=dtype, config=ScanConfig(), seed=5,
                             channels_last=channels_last)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_segments_on_gpu(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    config = ScanConfig(fwd_segments=4, bwd_segments=5)
    assert_matches_reference(dict(batch=2, dim=256, n=16, L=1000), ALL, config=config,
                             seed=6, channels_last=True)
