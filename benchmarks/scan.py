"""Selective-scan benchmark (CUDA): the `triton` backend beside mamba_ssm's CUDA kernel.

At the LM's shapes (batch 8, L 2048, d_inner 512 to 4096; batch 16, L 1024, d_inner 1024 and
4096), n = 16, bf16 and fp32 activations (u, Δ, z, B, C; A, D and the Δ bias float32, as
Mamba passes them), Δ bias + softplus, D and z on, identical values for every implementation:

- triton on the layout Mamba's mixer hands it ((batch, L, ·) buffers passed as transposed
  views: "bld") and on contiguous (batch, dim, L) tensors ("bdl");
- state-spaces/mamba's `selective_scan_fn` (mamba_ssm, its CUDA build) on contiguous
  (batch, dim, L) tensors, its own layout, when installed; the ratio columns are
  mamba time / triton time (above 1: triton is faster). Without it, the run says so;
- forward, forward+backward (all eight gradients) and their difference (the backward) times:
  median of CUDA-event timings after warm-up; peak memory of one forward+backward
  (torch.cuda.max_memory_allocated, inputs included); the least DRAM traffic (`floor_bytes`)
  as a share of the measured device-to-device copy bandwidth; `--chunked` adds the
  `chunked` backend.

    python benchmarks/scan.py                 # the table, bf16 and fp32 (a minute or two)
    python benchmarks/scan.py --dtypes bf16   # one activation dtype
    python benchmarks/scan.py --quick         # one shape, few repetitions
    python benchmarks/scan.py --sweep         # triton launch configurations, one shape
    python benchmarks/scan.py --sweep --all-shapes  # ... at every shape and dtype
    python benchmarks/scan.py --json out.json # also write the rows
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer.errors import UserError  # noqa: E402
from mutransfer.ops.mamba_ssm_scan import load_selective_scan_fn  # noqa: E402
from mutransfer.ops.scan import selective_scan  # noqa: E402
from mutransfer.ops.triton_scan import ScanConfig, selective_scan_triton  # noqa: E402

DEVICE = "cuda"
N_STATE = 16
FULL_SHAPES = [(8, 512, 2048), (8, 1024, 2048), (8, 2048, 2048), (8, 4096, 2048),
               (16, 1024, 1024), (16, 4096, 1024)]
QUICK_SHAPES = [(8, 1536, 1024)]
SWEEP = [
    ScanConfig(),
    ScanConfig(bwd_chunk=8, bwd_maxnreg=128),  # 128 registers: 16 warps per SM, not 8
    ScanConfig(fwd_block_d=64, bwd_block_d=64, bwd_chunk=8),  # two channels per thread
    ScanConfig(chunk=8, fwd_block_d=64, fwd_warps=2),
    ScanConfig(fwd_segments=1),  # the forward without time segments
    ScanConfig(bwd_segments=1),
    ScanConfig(target_programs=1024),
    ScanConfig(target_programs=4096),
    ScanConfig(ckpt_steps=128),
]
NAMES = ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def floor_bytes(batch: int, dim: int, n: int, L: int, act_bytes: int = 2) -> dict[str, int]:
    """The least DRAM traffic of one scan, in bytes (A, D and the Δ bias included, float32).

    forward:  read u, Δ, z (3 b d L) and B, C (2 b n L); write out (b d L).
    backward: read dout, u, Δ, z (4 b d L) and B, C (2 b n L); write du, dΔ, dz (3 b d L)
              and dB, dC (2 b n L); dA, dD, dΔbias are (d, n) and (d,) in float32.
    Checkpoints, recomputation and atomics are an implementation's cost, not counted.
    """
    act, bc = batch * dim * L * act_bytes, batch * n * L * act_bytes
    params = (dim * n + 2 * dim) * 4
    fwd = 4 * act + 2 * bc + params
    bwd = 7 * act + 4 * bc + 2 * params
    return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd}


def cuda_time_ms(fn: Callable[[], object], warmup: int, reps: int) -> float:
    """Median of `reps` CUDA-event timings after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth_gbs(gib: float = 2.0, reps: int = 20) -> float:
    """Device-to-device copy bandwidth, counting the read and the write (GB/s = 1e9 B/s)."""
    src = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    ms = cuda_time_ms(lambda: dst.copy_(src), warmup=3, reps=reps)
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def make_inputs(batch: int, dim: int, n: int, L: int, seed: int = 0,
                act: torch.dtype = torch.bfloat16) -> tuple[dict, torch.Tensor]:
    """Mamba-like inputs in (batch, dim, L) contiguous tensors and dout: `act` activations,
    A = -(1..n) per channel, Δ bias log(expm1(0.01)) (Δ about 0.01)."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def rnd(*shape, dtype=act):
        return torch.randn(*shape, generator=g, device=DEVICE).to(dtype)

    A = -torch.arange(1, n + 1, device=DEVICE, dtype=torch.float32).repeat(dim, 1)
    x = dict(u=rnd(batch, dim, L), delta=rnd(batch, dim, L), A=A, B=rnd(batch, n, L),
             C=rnd(batch, n, L), D=rnd(dim, dtype=torch.float32), z=rnd(batch, dim, L),
             delta_bias=torch.full((dim,), -4.6, device=DEVICE))
    return x, rnd(batch, dim, L)


def channels_last(x: dict, dout: torch.Tensor) -> tuple[dict, torch.Tensor]:
    """The same values the way Mamba's mixer passes them: (batch, ·, L) views of
    (batch, L, ·) buffers, z the second half of a (batch, L, 2 dim) one."""
    def view(t):
        return t.transpose(1, 2).contiguous().transpose(1, 2)

    y = {k: view(v) if k in ("u", "delta", "B", "C") else v for k, v in x.items()}
    xz = torch.cat([x["u"], x["z"]], 1).transpose(1, 2).contiguous()
    y["z"] = xz[..., x["u"].shape[1]:].transpose(1, 2)
    return y, view(dout)


def leaves(x: dict) -> dict:
    """Fresh leaves (same storage, same strides) to take gradients of."""
    return {k: v.detach().requires_grad_() for k, v in x.items()}


def scan_call(scan: Callable, x: dict) -> Callable[[], torch.Tensor]:
    return lambda: scan(x["u"], x["delta"], x["A"], x["B"], x["C"], D=x["D"], z=x["z"],
                        delta_bias=x["delta_bias"], delta_softplus=True)


def fwd_bwd_call(scan: Callable, x: dict, dout: torch.Tensor) -> Callable[[], object]:
    call, inputs = scan_call(scan, x), [x[k] for k in NAMES]
    return lambda: torch.autograd.grad(call(), inputs, dout)


def peak_mib(fn: Callable[[], object]) -> float:
    """Peak allocated memory during one call, MiB, inputs included."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20


@dataclass
class Timing:
    fwd_ms: float
    fwd_bwd_ms: float
    peak_mib: float

    @property
    def bwd_ms(self) -> float:
        """The backward alone: forward+backward less the forward."""
        return self.fwd_bwd_ms - self.fwd_ms


def timing(scan: Callable, x: dict, dout: torch.Tensor, args) -> Timing | None:
    """Forward, forward+backward and peak memory of one implementation (None on OOM)."""
    try:
        with torch.no_grad():
            fwd = cuda_time_ms(scan_call(scan, x), args.warmup, args.reps)
        both = cuda_time_ms(fwd_bwd_call(scan, x, dout), args.warmup, args.reps)
        return Timing(fwd, both, peak_mib(fwd_bwd_call(scan, x, dout)))
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


@dataclass
class Row:
    dtype: str
    batch: int
    d_inner: int
    L: int
    triton_bld: Timing
    triton_bdl: Timing
    mamba: Timing | None
    chunked: Timing | None
    floor_fwd_bwd_of_copy: float  # floor bytes / (f+b time on bld) / copy bandwidth

    def ratio(self, field: str) -> float | None:
        if self.mamba is None:
            return None
        return getattr(self.mamba, field) / getattr(self.triton_bld, field)


def bench_shape(batch: int, dim: int, L: int, copy_gbs: float, args, config: ScanConfig,
                mamba_fn: Callable | None, dtype: str = "bf16") -> Row:
    x, dout = make_inputs(batch, dim, N_STATE, L, act=DTYPES[dtype])
    triton = lambda *a, **k: selective_scan_triton(*a, **k, config=config)  # noqa: E731
    x_bld, dout_bld = channels_last(x, dout)
    bld = timing(triton, leaves(x_bld), dout_bld, args)
    bdl = timing(triton, leaves(x), dout, args)
    mamba = timing(mamba_fn, leaves(x), dout, args) if mamba_fn else None
    chunked = None
    if args.chunked:
        scan = lambda *a, **k: selective_scan(*a, **k, backend="chunked")  # noqa: E731
        chunked = timing(scan, leaves(x), dout, argparse.Namespace(warmup=1, reps=3))
    floor = floor_bytes(batch, dim, N_STATE, L, DTYPES[dtype].itemsize)["fwd_bwd"]
    share = floor / (bld.fwd_bwd_ms * 1e-3) / 1e9 / copy_gbs
    return Row(dtype, batch, dim, L, bld, bdl, mamba, chunked, share)


def _ms(t: Timing | None, field: str) -> str:
    return "-" if t is None else f"{getattr(t, field):.3f}"


def print_table(rows: list[Row], copy_gbs: float, have_mamba: bool) -> None:
    print(f"\ndevice: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"copy bandwidth: {copy_gbs:.0f} GB/s  n={N_STATE}, Δ softplus, D and z on")
    head = ["dtype", "b d L", "triton bld fwd ms", "triton bld bwd ms", "triton bld f+b ms",
            "triton bdl f+b ms", "mamba fwd ms", "mamba bwd ms", "mamba f+b ms",
            "mamba/triton fwd", "mamba/triton bwd", "mamba/triton f+b", "triton peak MiB",
            "mamba peak MiB", "f+b % of copy"]
    if rows and rows[0].chunked is not None:
        head.append("chunked f+b ms")
    print(" | ".join(head))
    for r in rows:
        fwd, bwd, both = (r.ratio(f) for f in ("fwd_ms", "bwd_ms", "fwd_bwd_ms"))
        cells = [r.dtype, f"{r.batch} {r.d_inner} {r.L}", _ms(r.triton_bld, "fwd_ms"),
                 _ms(r.triton_bld, "bwd_ms"), _ms(r.triton_bld, "fwd_bwd_ms"),
                 _ms(r.triton_bdl, "fwd_bwd_ms"), _ms(r.mamba, "fwd_ms"),
                 _ms(r.mamba, "bwd_ms"), _ms(r.mamba, "fwd_bwd_ms"),
                 "-" if fwd is None else f"{fwd:.2f}", "-" if bwd is None else f"{bwd:.2f}",
                 "-" if both is None else f"{both:.2f}", f"{r.triton_bld.peak_mib:.0f}",
                 "-" if r.mamba is None else f"{r.mamba.peak_mib:.0f}",
                 f"{100 * r.floor_fwd_bwd_of_copy:.0f}%"]
        if r.chunked is not None:
            cells.append(_ms(r.chunked, "fwd_bwd_ms"))
        print(" | ".join(cells))
    if not have_mamba:
        print("mamba_ssm: not available, no side-by-side columns (the reason is above; "
              "benchmarks/README.md says how to build it)")


def sweep(copy_gbs: float, args, mamba_fn: Callable | None) -> None:
    """Time each triton launch configuration on one shape (the largest, or --quick's), or
    with --all-shapes on every shape and dtype of the table (what a new default is chosen
    on: one shape's best is not another's)."""
    shapes = QUICK_SHAPES if args.quick else FULL_SHAPES
    if not args.all_shapes:
        shapes = [max(shapes, key=lambda s: s[0] * s[1] * s[2])]
    for dtype in args.dtypes if args.all_shapes else ["bf16"]:
        for batch, dim, L in shapes:
            print(f"\nsweep at {dtype}, batch {batch}, d_inner {dim}, L {L} (layout bld)",
                  flush=True)
            m = None
            if mamba_fn:
                x, dout = make_inputs(batch, dim, N_STATE, L, act=DTYPES[dtype])
                m = timing(mamba_fn, leaves(x), dout, args)
                print(f"mamba_ssm: fwd {m.fwd_ms:.3f} ms, fwd+bwd {m.fwd_bwd_ms:.3f} ms, "
                      f"peak {m.peak_mib:.0f} MiB")
            for config in SWEEP:
                t = bench_shape(batch, dim, L, copy_gbs, args, config, None, dtype).triton_bld
                vs = f", {m.fwd_bwd_ms / t.fwd_bwd_ms:.2f}x mamba's f+b" if m else ""
                print(f"{config}: fwd {t.fwd_ms:.3f} ms, fwd+bwd {t.fwd_bwd_ms:.3f} ms{vs}, "
                      f"peak {t.peak_mib:.0f} MiB", flush=True)


def mamba_or_none() -> Callable | None:
    try:
        return load_selective_scan_fn()
    except UserError as exc:
        print(f"mamba_ssm not available: {exc}", file=sys.stderr)
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one shape, few repetitions")
    p.add_argument("--sweep", action="store_true", help="compare triton launch configurations")
    p.add_argument("--all-shapes", action="store_true",
                   help="with --sweep: at every shape and dtype, not only the largest bf16")
    p.add_argument("--chunked", action="store_true", help="also time the chunked backend")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--reps", type=int, default=None)
    p.add_argument("--json", help="also write the rows to this file")
    p.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES),
                   help="activation dtypes of the table (default: bf16 fp32)")
    args = p.parse_args(argv)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    args.reps = args.reps if args.reps is not None else (5 if args.quick else 20)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/scan.py needs a CUDA GPU (torch.cuda.is_available() is False); "
              "the interpreter tests in tests/test_scan_triton.py cover correctness on CPU",
              file=sys.stderr)
        return 2
    mamba_fn = mamba_or_none()
    copy_gbs = copy_bandwidth_gbs(gib=0.5 if args.quick else 2.0)
    torch.cuda.empty_cache()  # return the copy buffers before measuring peaks
    if args.sweep:
        sweep(copy_gbs, args, mamba_fn)
        return 0
    rows = [bench_shape(b, d, L, copy_gbs, args, ScanConfig(), mamba_fn, dtype)
            for dtype in args.dtypes
            for b, d, L in (QUICK_SHAPES if args.quick else FULL_SHAPES)]
    print_table(rows, copy_gbs, mamba_fn is not None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbs": copy_gbs,
                       "mamba_ssm": mamba_fn is not None, "rows": [asdict(r) for r in rows]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
