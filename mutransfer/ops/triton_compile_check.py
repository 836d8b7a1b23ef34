"""Compile the scan kernels for a CUDA architecture on a machine without a GPU.

The Triton interpreter runs the kernels as Python, so it misses what only the compiler
rejects (a non-constexpr global, an op a backend lacks) and says nothing about registers.
This compiles every kernel ahead of time (ttir -> ptx -> cubin with the ptxas that ships
with triton) and reads each cubin with triton's bundled cuobjdump and nvdisasm: registers,
stack and local memory (spills), shared memory, the instructions of the loop over state
indices per element (one element = one (batch, channel, step, state)) and those of the rest
of the chunk loop per step (one (batch, channel, step): loads, softplus, gate, stores),
split into classes:

    python -m mutransfer.ops.triton_compile_check [--arch 90] [--dtype bf16|fp32]
        [--chunk 16 --bwd-chunk 16 --ckpt-steps 64 --fwd-block-d 32 --fwd-warps 1
         --bwd-block-d 32 --fwd-maxnreg N --bwd-maxnreg N]

Run it without TRITON_INTERPRET set (the kernels must be compiled, not interpreted, objects).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from mutransfer.ops import causal_conv
from mutransfer.ops.triton_scan import DEFAULT_CONFIG, ScanConfig, load_kernels

# pointer arguments in the activations' dtype; every other pointer is float32
_ACTIVATIONS = {"u_ptr", "delta_ptr", "z_ptr", "out_ptr", "dout_ptr", "du_ptr", "ddelta_ptr",
                "dz_ptr", "x_ptr", "g_ptr", "dpre_ptr", "dx_ptr"}
# integer arguments that are multiples of 16 at the benchmark shapes (triton specialises them)
_DIVISIBLE = {"dim", "L", "L_pad", "N", "u_sb", "dl_sb", "z_sb", "o_sb", "g_sb", "du_sb", "dd_sb",
              "dz_sb", "x_sb", "x_st", "g_st"}
# the launch sizes the command line can set
_TUNABLE = ("chunk", "bwd_chunk", "ckpt_steps", "fwd_block_d", "fwd_warps", "bwd_block_d",
            "fwd_maxnreg", "bwd_maxnreg")
# SASS opcode classes reported per element of the innermost loop
_CLASSES = {"shuffle": ("SHFL",), "shared": ("LDS", "STS", "LDSM", "ATOMS"), "barrier": ("BAR",),
            "exp2": ("MUFU",), "global": ("LDG", "STG", "RED", "ATOMG"),
            "local": ("LDL", "STL")}


@dataclass
class KernelBuild:
    name: str
    cubin: bytes
    registers: int | None  # from cuobjdump, None when it is not available
    spill_bytes: int | None  # stack + local memory per thread: spills
    shared_bytes: int  # static shared memory the kernel asks for (triton's metadata)
    elements_per_iteration: int  # (channel, step) pairs a thread handles per state index
    loop: dict[str, int] = field(default_factory=dict)  # innermost loop: class -> count
    chunk: dict[str, int] = field(default_factory=dict)  # the rest of the loop around it


def _signature(kernel, act: str, constexprs: dict) -> tuple[dict, dict]:
    """Argument types and divisibility hints for `triton.compile`."""
    signature, attrs = {}, {}
    skip = set(getattr(kernel, "do_not_specialize", ()) or ())
    for i, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        if name.endswith("_ptr"):
            signature[name] = "*" + (act if name in _ACTIVATIONS else "fp32")
        else:
            signature[name] = "i32"
        hinted = name.endswith("_ptr") or name in _DIVISIBLE
        if hinted and i not in skip and name not in skip:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, attrs


def _tool(name: str) -> str | None:
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return path if os.path.exists(path) else None


def _run_tool(name: str, args: list[str], cubin: bytes) -> str:
    tool = _tool(name)
    if tool is None:
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, *args, f.name], capture_output=True, text=True).stdout


def _resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers, stack + local bytes) of the cubin's one kernel, via triton's cuobjdump
    (ptxas puts spilled registers on the stack)."""
    text = _run_tool("cuobjdump", ["-res-usage"], cubin)
    reg = re.search(r"REG:(\d+)", text)
    mem = [int(m.group(1)) for m in re.finditer(r"(?:STACK|LOCAL):(\d+)", text)]
    return (int(reg.group(1)) if reg else None, sum(mem) if mem else None)


_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")
_LABEL = re.compile(r"^(\.L_x_\d+):")


def loop_counts(sass: str) -> tuple[dict[str, int], dict[str, int]]:
    """Instruction counts of the main innermost loop of a SASS listing (the longest loop,
    a backward branch, that contains no other: the loop over state indices) and of the rest
    of the loop around it (the per-chunk work): 'all' and the classes of `_CLASSES`.
    Empty without nvdisasm."""
    labels, pending, instrs = {}, [], []
    for line in sass.splitlines():
        if m := _LABEL.match(line):
            pending.append(m.group(1))
        elif m := _INSTR.search(line):
            addr = int(m.group(1), 16)
            labels.update({lab: addr for lab in pending})
            pending = []
            target = re.search(r"BRA\s+`\((\.L_x_\d+)\)", line)
            instrs.append((addr, m.group(2), target.group(1) if target else None))
    loops = [(labels[t], addr) for addr, _, t in instrs if t in labels and labels[t] < addr]
    if not loops:
        return {}, {}

    def inside(r, o):
        return r[0] <= o[0] and o[1] <= r[1] and o != r

    inner = max((r for r in loops if not any(inside(r, o) for o in loops)),
                key=lambda r: r[1] - r[0])
    around = [r for r in loops if inside(r, inner)]
    outer = min(around, key=lambda r: r[1] - r[0]) if around else inner

    def counts(keep) -> dict[str, int]:
        ops = collections.Counter(op for addr, op, _ in instrs if keep(addr))
        result = {"all": sum(ops.values())}
        result.update({k: sum(ops[o] for o in v) for k, v in _CLASSES.items()})
        return result

    in_inner = lambda a: inner[0] <= a <= inner[1]  # noqa: E731
    return counts(in_inner), counts(lambda a: outer[0] <= a <= outer[1] and not in_inner(a))


def _jobs(kernels, config: ScanConfig) -> list[tuple]:
    """(label, kernel, constexprs, launch options, elements per thread and state index)."""
    opts = dict(HAS_D=True, HAS_Z=True, HAS_BIAS=True, SOFTPLUS=True)
    fwd = dict(opts, BLOCK_D=config.fwd_block_d, CHUNK=config.chunk,
               CKPT_CHUNKS=config.ckpt_steps // config.chunk)
    per_fwd = config.chunk * max(1, config.fwd_block_d // (32 * config.fwd_warps))
    per_bwd = config.bwd_chunk * config.bwd_block_d // 32
    return [
        ("scan_fwd_kernel", kernels.scan_fwd_kernel, dict(fwd, ENDS_ONLY=False),
         config.launch_options("fwd"), per_fwd),
        ("scan_fwd_kernel[ENDS_ONLY]", kernels.scan_fwd_kernel, dict(fwd, ENDS_ONLY=True),
         config.launch_options("fwd"), per_fwd),
        ("scan_bwd_carry_kernel", kernels.scan_bwd_carry_kernel,
         dict(HAS_Z=True, HAS_BIAS=True, SOFTPLUS=True, BLOCK_D=config.bwd_block_d,
              CHUNK=config.bwd_chunk), config.launch_options("bwd"), per_bwd),
        ("scan_bwd_kernel", kernels.scan_bwd_kernel,
         dict(opts, BLOCK_D=config.bwd_block_d, CHUNK=config.bwd_chunk,
              CKPT_CHUNKS=config.ckpt_steps // config.bwd_chunk), config.launch_options("bwd"),
         per_bwd),
    ]


def _conv_jobs() -> list[tuple]:
    """The causal conv + SiLU kernels at their fixed tiles, channel strides 1 (specialised
    as at run time: x is a view of in_proj's output, gradients contiguous)."""
    # conv_kernels imports triton: imported here, after load_kernels has checked that triton
    # is there and new enough (a missing one is a one-line UserError, not an ImportError)
    from mutransfer.ops import conv_kernels

    tiles = dict(K=4, BLOCK_T=causal_conv.BLOCK_T, BLOCK_D=causal_conv.BLOCK_D)
    options = {"num_warps": causal_conv.WARPS}
    per = causal_conv.BLOCK_T * causal_conv.BLOCK_D // (32 * causal_conv.WARPS)
    return [(k.__name__, k, dict(tiles, **unit), options, per) for k, unit in (
        (conv_kernels.conv_silu_fwd_kernel, {"x_sd": 1}),
        (conv_kernels.conv_silu_bwd_pre_kernel, {"x_sd": 1, "g_sd": 1}),
        (conv_kernels.conv_bwd_dx_kernel, {}))]


def compile_kernels(arch: int = 90, act: str = "bf16",
                    config: ScanConfig = DEFAULT_CONFIG) -> list[KernelBuild]:
    """Every scan kernel with every option on (D, z, Δ bias, softplus), then the conv's."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    builds = []
    for label, kernel, constexprs, options, per_thread in (_jobs(load_kernels(), config)
                                                           + _conv_jobs()):
        signature, attrs = _signature(kernel, act, constexprs)
        compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", arch, 32), options=options)
        cubin = compiled.asm["cubin"]
        builds.append(KernelBuild(label, cubin, *_resource_usage(cubin),
                                  compiled.metadata.shared, per_thread,
                                  *loop_counts(_run_tool("nvdisasm", ["-c"], cubin))))
    return builds


def format_build(b: KernelBuild, arch: int) -> str:
    line = (f"{b.name}: sm_{arch} cubin {len(b.cubin)} bytes, registers {b.registers}, "
            f"spill (stack+local) bytes {b.spill_bytes}, shared bytes {b.shared_bytes}")
    per = b.elements_per_iteration
    for what, counts in (("state loop, per element", b.loop),
                         ("rest of the chunk loop, per step", b.chunk)):
        if counts:
            parts = ", ".join(f"{k} {v / per:.2f}" for k, v in counts.items() if v)
            line += f"\n  {what} ({per} per thread): {parts}"
    return line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability x10 (90: Hopper)")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    for name in _TUNABLE:
        p.add_argument("--" + name.replace("_", "-"), type=int,
                       default=getattr(DEFAULT_CONFIG, name))
    args = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter does not compile", file=sys.stderr)
        return 2
    try:
        config = ScanConfig(**{k: getattr(args, k) for k in _TUNABLE})
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{config}, activations {args.dtype}")
    for b in compile_kernels(args.arch, args.dtype, config):
        print(format_build(b, args.arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
