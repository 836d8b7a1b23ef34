"""Build the reference CUDA kernels the GPU benchmarks compare against, from carried source.

    python benchmarks/build_cuda_refs.py --src .devkit/src --out /tmp/devkit-build

On the lent GPU machine nothing can be downloaded, so `pip install mamba-ssm` (which first
looks for a prebuilt wheel online, then compiles for every architecture from sm_75 up) cannot
run there. This compiles the two extensions that `mamba_ssm.ops.selective_scan_interface` and
`causal_conv1d` import, from the source trees benchmarks/device_kit.sh stages (`git archive`
of state-spaces/mamba and Dao-AILab/causal-conv1d), for this GPU's architecture only, with
ninja on every core:

- `selective_scan_cuda`: mamba's csrc/selective_scan (the sources and nvcc flags of its
  setup.py, v2.3.2.post1);
- `causal_conv1d_cuda`: causal-conv1d's csrc (its setup.py's, v1.6.1.post4): Mamba's fused
  fast path (`mamba_inner_fn`) needs it; without it mamba_ssm's Mamba runs its slow path.

Each built module lands as OUT/<name>.so (put OUT on PYTHONPATH, with the source trees for the
Python packages: benchmarks/device_setup.sh does both). One line per extension: built, with the
seconds it took, or why not (a failed build adds the compiler's last 40 lines); exit 1 when
one failed, 2 without CUDA (nothing built).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import torch

# The nvcc flags both setup.py files pass (half and bfloat16 operators on, fast math, lambdas
# in device code); mamba's also pins C++17. Only the -gencode differs: this GPU's arch alone.
NVCC_FLAGS = ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
              "-lineinfo", "--threads", "4"]

SCAN_SOURCES = ["selective_scan.cpp", "selective_scan_fwd_fp32.cu", "selective_scan_fwd_fp16.cu",
                "selective_scan_fwd_bf16.cu"] + [
    f"selective_scan_bwd_{dtype}_{kind}.cu" for dtype in ("fp32", "fp16", "bf16")
    for kind in ("real", "complex")]
CONV_SOURCES = ["causal_conv1d.cpp", "causal_conv1d_fwd.cu", "causal_conv1d_bwd.cu",
                "causal_conv1d_update.cu"]


def extensions(src: Path) -> dict[str, tuple[Path, list[str], list[str]]]:
    """name -> (source folder, source files, extra C++17 flag or none)."""
    return {"selective_scan_cuda": (src / "mamba" / "csrc" / "selective_scan", SCAN_SOURCES,
                                    ["-std=c++17"]),
            "causal_conv1d_cuda": (src / "causal-conv1d" / "csrc", CONV_SOURCES, [])}


def build(name: str, folder: Path, sources: list[str], std: list[str], out: Path,
          arch: str) -> str:
    from torch.utils.cpp_extension import load

    work = out / f"{name}.build"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    module = load(name=name, sources=[str(folder / s) for s in sources],
                  extra_include_paths=[str(folder)],
                  extra_cflags=["-O3", *std],
                  extra_cuda_cflags=[*NVCC_FLAGS, *std,
                                     f"-gencode=arch=compute_{arch},code=sm_{arch}"],
                  build_directory=str(work), verbose=False)
    shutil.copy2(module.__file__, out / f"{name}.so")
    return f"{name}: built for sm_{arch} in {time.time() - t0:.0f} s -> {out / (name + '.so')}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=".devkit/src", help="folder holding mamba/ and causal-conv1d/")
    ap.add_argument("--out", default="/tmp/devkit-build")
    ap.add_argument("--only", choices=["selective_scan_cuda", "causal_conv1d_cuda"], nargs="+")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("build_cuda_refs: no CUDA device here; nothing was built", file=sys.stderr)
        return 2
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}"
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 4))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, (folder, sources, std) in extensions(Path(args.src)).items():
        if args.only and name not in args.only:
            continue
        missing = [s for s in sources if not (folder / s).exists()]
        if missing:
            print(f"{name}: not built: {folder} lacks {', '.join(missing)} "
                  "(stage the source with benchmarks/device_kit.sh)", flush=True)
            failed = 1
            continue
        try:
            print(build(name, folder, sources, std, out, arch), flush=True)
        except Exception as exc:  # a compiler error: its last lines, then build the other
            lines = str(exc).splitlines()
            print(f"{name}: build failed: {type(exc).__name__}; the compiler's last lines:",
                  *lines[-40:], sep="\n", flush=True)
            failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
