"""Compile the scan kernels for a CUDA architecture on a machine without a GPU.

The Triton interpreter runs the kernels as Python, so it misses what only the compiler
rejects (a non-constexpr global, an op a backend lacks) and says nothing about registers.
This compiles forward and backward ahead of time (ttir -> ptx -> cubin with the ptxas that
ships with triton) and, where triton's cuobjdump is present, reads each cubin's register and
local-memory (spill) use:

    python -m mutransfer.ops.triton_compile_check [--arch 90] [--dtype bf16|fp32]

Run it without TRITON_INTERPRET set (the kernels must be compiled, not interpreted, objects).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from mutransfer.ops.triton_scan import DEFAULT_CONFIG, ScanConfig, _pow2, load_kernels

# pointer arguments in the activations' dtype; every other pointer is float32
_ACTIVATIONS = {"u_ptr", "delta_ptr", "z_ptr", "out_ptr", "dout_ptr", "du_ptr", "ddelta_ptr",
                "dz_ptr", "B_ptr", "C_ptr"}
# integer arguments that are multiples of 16 at the benchmark shapes (triton specialises them)
_DIVISIBLE = {"dim", "L", "N", "n_chunks"}


@dataclass
class KernelBuild:
    name: str
    cubin: bytes
    registers: int | None  # from cuobjdump, None when it is not available
    local_bytes: int | None  # spills and stack


def _signature(kernel, act: str, constexprs: dict) -> tuple[dict, dict]:
    """Argument types and divisibility hints for `triton.compile`."""
    signature, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        if name.endswith("_ptr"):
            signature[name] = "*" + (act if name in _ACTIVATIONS else "fp32")
        else:
            signature[name] = "i32"
        if name.endswith("_ptr") or name in _DIVISIBLE:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, attrs


def _resource_usage(cubin: bytes) -> tuple[int | None, int | None]:
    """(registers, local bytes) of the cubin's one kernel, via triton's bundled cuobjdump."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    if not os.path.exists(tool):
        return None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "-res-usage", f.name], capture_output=True,
                              text=True).stdout
    reg, local = re.search(r"REG:(\d+)", text), re.search(r"LOCAL:(\d+)", text)
    return (int(reg.group(1)) if reg else None, int(local.group(1)) if local else None)


def compile_kernels(arch: int = 90, act: str = "bf16", config: ScanConfig = DEFAULT_CONFIG,
                    n_state: int = 16) -> list[KernelBuild]:
    """Forward and backward with every option on (D, z, Δ bias, softplus)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernels = load_kernels()
    options = dict(HAS_D=True, HAS_Z=True, HAS_BIAS=True, SOFTPLUS=True)
    jobs = [
        (kernels.scan_fwd_kernel, dict(options, BLOCK_D=config.fwd_block_d, CHUNK=config.chunk),
         config.fwd_warps),
        (kernels.scan_bwd_kernel, dict(options, BLOCK_D=config.bwd_block_d, CHUNK=config.chunk,
                                       N_PAD=_pow2(n_state), BY_FLIP=config.reverse_by_flip),
         config.bwd_warps),
    ]
    builds = []
    for kernel, constexprs, warps in jobs:
        signature, attrs = _signature(kernel, act, constexprs)
        compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": warps})
        cubin = compiled.asm["cubin"]
        builds.append(KernelBuild(kernel.__name__, cubin, *_resource_usage(cubin)))
    return builds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability x10 (90: Hopper)")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    args = p.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter does not compile", file=sys.stderr)
        return 2
    for b in compile_kernels(args.arch, args.dtype):
        print(f"{b.name}: sm_{args.arch} cubin {len(b.cubin)} bytes, registers {b.registers}, "
              f"local (spill) bytes {b.local_bytes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
