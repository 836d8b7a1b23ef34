"""Bit-reproducibility on the GPU: one cell of a sweep trained twice, its losses compared.

    python benchmarks/gpu_repro.py [--sweep sweeps/gpu_width.yaml] [--width 256]
        [--param mup_ssm] [--steps 200] [--backends triton reference] [--device cuda]

The trial is the one the sweep runs (load_plan -> the cell's config -> TrialConfig: model,
data, schedule and seed as `mutransfer sweep` builds them), at the cell's middle LR, seed 0,
with `--steps` (the schedule's warmup kept) and each scan backend in turn. Each is trained
twice in this process and every eval loss (train and eval, each eval point) is compared bit
for bit: one line per backend, identical or the first step that differs and the largest
|difference|. Then the reference backend twice more with the causal conv by torch too (on
CUDA it runs triton kernels whatever the scan backend) under
torch.use_deterministic_algorithms(True, warn_only=True): compared the same way, with the
torch operations that warned of having no deterministic implementation.

What to expect: the Triton scan's and the Triton conv's backward sum the gradients of B, C,
A, D, the Delta bias and the conv weights over programs with float atomic adds, whose order
varies from run to run, so losses differ after the first updates with either scan backend
(the conv is triton's in both); with torch kernels alone they should not.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer.config import TrialConfig  # noqa: E402
from mutransfer.ops import causal_conv  # noqa: E402
from mutransfer.sweep.plan.cells import load_plan  # noqa: E402
from mutransfer.train import run_trial  # noqa: E402


def cell_config(sweep: str, width: int, param: str) -> dict:
    """The sweep's seed-0 cell at `width` and `param`, at the middle of its LRs."""
    cells = [c for c in load_plan(sweep).cells
             if c.width == width and c.config["param"]["name"] == param
             and c.config["train"]["seed"] == 0]
    if not cells:
        raise SystemExit(f"gpu_repro: {sweep} has no seed-0 cell at width {width}, {param}")
    cells.sort(key=lambda c: c.config["train"]["lr"])
    return cells[len(cells) // 2].config


def variant(config: dict, backend: str, steps: int, device: str) -> TrialConfig:
    train = {**config["train"], "steps": steps, "eval_every": max(1, steps // 4),
             "device": device}
    return TrialConfig(**{**config, "model": {**config["model"], "scan_backend": backend},
                          "train": train})


def losses(config: TrialConfig) -> list[tuple[int, str, float]]:
    """(step, key, value) of every loss in the trial's eval history."""
    out = []
    for point in run_trial(config).history:
        out += [(int(point["step"]), k, float(v)) for k, v in sorted(point.items())
                if "loss" in k and isinstance(v, (int, float))]
    return out


def compare(a: list[tuple[int, str, float]], b: list[tuple[int, str, float]]) -> str:
    differ = [(s, k, x, y) for (s, k, x), (_, _, y) in zip(a, b, strict=True)
              if not (x == y or (math.isnan(x) and math.isnan(y)))]
    if not differ:
        return f"identical ({len(a)} losses, bit for bit)"
    step, key = differ[0][:2]
    worst = max(abs(x - y) for _, _, x, y in differ)
    return (f"DIFFER: {len(differ)} of {len(a)} losses, first at step {step} ({key}), "
            f"largest |difference| {worst:.3g}")


def torch_only_twice(config: TrialConfig) -> tuple[str, list[str]]:
    """The trial twice with every kernel from torch (the causal conv by torch's conv1d, not
    the triton kernels it runs on CUDA) under torch.use_deterministic_algorithms(True,
    warn_only=True): the comparison, and the warnings torch gives for operations without a
    deterministic implementation (each once)."""
    torch.use_deterministic_algorithms(True, warn_only=True)
    triton_conv = causal_conv.use_triton
    causal_conv.use_triton = lambda x: False  # the module looks it up at each call
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            verdict = compare(losses(config), losses(config))
    finally:
        causal_conv.use_triton = triton_conv
        torch.use_deterministic_algorithms(False)
    seen = dict.fromkeys(str(w.message).splitlines()[0] for w in caught
                         if "determinis" in str(w.message))
    return verdict, list(seen)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", default="sweeps/gpu_width.yaml")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--param", default="mup_ssm")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--backends", nargs="+", default=["triton", "reference"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_repro: no CUDA device here; nothing was run", file=sys.stderr)
        return 2
    base = cell_config(args.sweep, args.width, args.param)
    print(f"cell: width {args.width}, {args.param}, lr {base['train']['lr']:.4g}, seed 0, "
          f"{args.steps} steps, device {args.device}, torch {torch.__version__}", flush=True)
    for backend in args.backends:
        config = variant(base, backend, args.steps, args.device)
        print(f"{backend}: {compare(losses(config), losses(config))}", flush=True)
    verdict, ops = torch_only_twice(variant(base, "reference", args.steps, args.device))
    print(f"reference scan, torch conv, deterministic torch: {verdict}", flush=True)
    print("torch operations without a deterministic implementation: "
          + ("; ".join(ops) if ops else "none warned"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
