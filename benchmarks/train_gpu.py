"""Training throughput on a CUDA GPU: tokens/s and model FLOP utilisation of a 3-block Mamba.

    python benchmarks/train_gpu.py [--widths 512 1024 2048 4096] [--steps 20] [--backend triton]

bf16 autocast with float32 parameters and scan state, as the trainer runs on CUDA. Model
FLOPs count the matrix multiplies only (6 · matmul parameters per token, the readout
included), as is usual for MFU; the scan's elementwise work is left out, so MFU here is
a lower bound of the work done. The peak is a measured bf16 matmul rate on this GPU.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from mutransfer.config import TrialConfig
from mutransfer.data.base import DataSpec
from mutransfer.models.build import build_model
from mutransfer.optim import make_optimizer

SPEC = DataSpec(kind="tokens", vocab_size=256, input_dim=None, output_dim=256, loss="ce")


def matmul_peak(n: int = 8192, reps: int = 20) -> float:
    """Measured bf16 matmul FLOP/s."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t0)


def matmul_params(model: torch.nn.Module) -> int:
    """Parameters used in matrix multiplies (2-D weights; the tied embedding as readout)."""
    return sum(p.numel() for n, p in model.named_parameters()
               if p.dim() == 2 and "A_log" not in n)


def bench(width: int, steps: int, batch: int, seq_len: int, backend: str) -> dict:
    cfg = TrialConfig(width=width, model={"n_layer": 3, "base_width": 256,
                                          "scan_backend": backend},
                      train={"optimizer": "adamw", "lr": 1e-3, "device": "cuda"})
    model = build_model(cfg, SPEC).cuda()
    opt = make_optimizer(model, cfg)
    x = torch.randint(0, 256, (batch, seq_len + 1), device="cuda")
    inputs, targets = x[:, :-1], x[:, 1:]

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, 256), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / steps
    tokens = batch * seq_len
    flops = 6 * matmul_params(model) * tokens
    return {"width": width, "tok_s": tokens / seconds, "tflops": flops / seconds / 1e12,
            "step_ms": seconds * 1e3, "mem_gb": torch.cuda.max_memory_allocated() / 2**30}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--backend", default="auto", help="scan backend (auto: triton on CUDA)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("train_gpu.py needs a CUDA GPU; none is available here")
    peak = matmul_peak()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, measured bf16 matmul "
          f"peak {peak / 1e12:.0f} TFLOP/s; batch {args.batch}, seq_len {args.seq_len}, "
          f"3 blocks, scan backend {args.backend}")
    print(f"{'width':>6} {'tokens/s':>12} {'step ms':>9} {'TFLOP/s':>9} {'MFU':>6} {'peak GiB':>9}")
    for width in args.widths:
        r = bench(width, args.steps, args.batch, args.seq_len, args.backend)
        print(f"{r['width']:>6} {r['tok_s']:>12,.0f} {r['step_ms']:>9.1f} {r['tflops']:>9.1f} "
              f"{r['tflops'] * 1e12 / peak:>6.1%} {r['mem_gb']:>9.1f}")


if __name__ == "__main__":
    main()
