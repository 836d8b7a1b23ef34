"""Training throughput on a CUDA GPU: the project's Mamba LM beside one built on mamba_ssm.

    python benchmarks/train_gpu.py [--widths 256 512 1024 2048] [--steps 20] [--backend auto]
    python benchmarks/train_gpu.py --profile 1024   # where one step's CUDA time goes
    python benchmarks/train_gpu.py --slow-path      # mamba_ssm without its fused fast path

Both LMs: 3 pre-norm residual blocks (RMSNorm, mixer), final norm, readout tied to the
embedding, vocab 256, the same batch (8 x 2048 tokens), bf16 autocast with float32
parameters, AdamW (torch's fused kernel on CUDA for both). The project's is built as the
trainer builds it (`build_model`, scan backend `--backend`, auto: triton on CUDA). The other
uses `mamba_ssm.modules.mamba_simple.Mamba` for its mixers when mamba_ssm (its CUDA build) is
installed; its fast path needs the causal-conv1d package, and without it Mamba runs its slow
path (PyTorch conv1d + the CUDA selective scan), which the output names. The ratio column is
project tokens/s over mamba_ssm tokens/s.

MFU counts matrix multiplies only (6 x matmul parameters per token, the readout included),
against a measured bf16 matmul rate on this GPU: a lower bound of the work done.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer.config import TrialConfig  # noqa: E402
from mutransfer.data.base import DataSpec  # noqa: E402
from mutransfer.errors import UserError  # noqa: E402
from mutransfer.models.build import build_model  # noqa: E402
from mutransfer.ops.mamba_ssm_scan import load_selective_scan_fn  # noqa: E402
from mutransfer.optim import make_optimizer  # noqa: E402

VOCAB, N_LAYER = 256, 3
SPEC = DataSpec(kind="tokens", vocab_size=VOCAB, input_dim=None, output_dim=VOCAB, loss="ce")


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


def matmul_params(model: nn.Module) -> int:
    """Parameters used in matrix multiplies (2-D weights; the tied embedding as readout)."""
    return sum(p.numel() for n, p in model.named_parameters()
               if p.dim() == 2 and "A_log" not in n)


def project_lm(width: int, backend: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    cfg = TrialConfig(width=width, model={"n_layer": N_LAYER, "base_width": 256,
                                          "scan_backend": backend},
                      train={"optimizer": "adamw", "lr": 1e-3, "device": "cuda"})
    model = build_model(cfg, SPEC).cuda()
    return model, make_optimizer(model, cfg)


class MambaSSMLM(nn.Module):
    """The same LM shape on mamba_ssm's Mamba mixer (as its MixerModel, without fused norms)."""

    def __init__(self, width: int, mamba_cls: Callable) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, width)
        self.norms = nn.ModuleList(nn.RMSNorm(width, eps=1e-5) for _ in range(N_LAYER))
        self.mixers = nn.ModuleList(mamba_cls(width, d_state=16, d_conv=4, expand=2,
                                              layer_idx=i) for i in range(N_LAYER))
        self.norm_f = nn.RMSNorm(width, eps=1e-5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids)
        for norm, mixer in zip(self.norms, self.mixers):
            x = x + mixer(norm(x))
        return F.linear(self.norm_f(x), self.embedding.weight)


def mamba_ssm_lm(width: int, mamba_cls: Callable) -> tuple[nn.Module, torch.optim.Optimizer]:
    model = MambaSSMLM(width, mamba_cls).cuda()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95),
                                    fused=True)


def load_mamba_ssm(slow_path: bool) -> tuple[Callable | None, str]:
    """A factory of mamba_ssm Mamba mixers (None when mamba_ssm is not usable) and a line
    saying which of its paths runs."""
    try:
        load_selective_scan_fn()  # the package and its CUDA extension, or a UserError
        from mamba_ssm.modules import mamba_simple
    except (UserError, ImportError) as exc:
        return None, f"mamba_ssm: not available, no side-by-side column: {exc}"
    if slow_path or mamba_simple.causal_conv1d_fn is None:
        why = "--slow-path" if slow_path else "causal-conv1d not installed"
        path = f"slow path (PyTorch conv1d + the CUDA selective scan; {why})"
    else:
        path = "fast path (causal-conv1d installed: the fused mamba_inner_fn)"
    return (partial(mamba_simple.Mamba, use_fast_path=not slow_path),
            f"mamba_ssm: Mamba module, {path}")


def step_fn(model: nn.Module, opt: torch.optim.Optimizer, batch: int,
            seq_len: int) -> Callable[[], None]:
    x = torch.randint(0, VOCAB, (batch, seq_len + 1), device="cuda")
    inputs, targets = x[:, :-1], x[:, 1:]

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def measure(model: nn.Module, opt: torch.optim.Optimizer, steps: int, batch: int,
            seq_len: int) -> dict:
    step = step_fn(model, opt, batch, seq_len)
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
    return {"tok_s": tokens / seconds, "step_ms": seconds * 1e3,
            "tflops": 6 * matmul_params(model) * tokens / seconds / 1e12,
            "mem_gb": torch.cuda.max_memory_allocated() / 2**30}


def profile(width: int, backend: str, batch: int, seq_len: int, rows: int = 25) -> None:
    """The CUDA kernels of a few steps of the project's LM, by total CUDA time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model, opt = project_lm(width, backend)
    step = step_fn(model, opt, batch, seq_len)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--backend", default="auto", help="scan backend (auto: triton on CUDA)")
    ap.add_argument("--slow-path", action="store_true",
                    help="run mamba_ssm's Mamba on its slow path even with causal-conv1d")
    ap.add_argument("--profile", type=int, metavar="WIDTH",
                    help="print the CUDA kernel table of the project's LM at this width")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("train_gpu.py needs a CUDA GPU; none is available here", file=sys.stderr)
        return 2
    if args.profile:
        profile(args.profile, args.backend, args.batch, args.seq_len)
        return 0
    peak = matmul_peak()
    mamba_cls, mamba_line = load_mamba_ssm(args.slow_path)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, measured bf16 matmul "
          f"peak {peak / 1e12:.0f} TFLOP/s; batch {args.batch} x {args.seq_len} tokens, "
          f"{N_LAYER} blocks, vocab {VOCAB}, project scan backend {args.backend}")
    print(mamba_line)
    print(f"{'width':>6} {'project tok/s':>14} {'step ms':>8} {'MFU':>6} {'GiB':>5} "
          f"{'mamba_ssm tok/s':>16} {'step ms':>8} {'GiB':>5} {'ratio':>6}")
    for width in args.widths:
        ours = measure(*project_lm(width, args.backend), args.steps, args.batch, args.seq_len)
        line = (f"{width:>6} {ours['tok_s']:>14,.0f} {ours['step_ms']:>8.1f} "
                f"{ours['tflops'] * 1e12 / peak:>6.1%} {ours['mem_gb']:>5.1f}")
        if mamba_cls is not None:
            ref = measure(*mamba_ssm_lm(width, mamba_cls), args.steps, args.batch,
                          args.seq_len)
            line += (f" {ref['tok_s']:>16,.0f} {ref['step_ms']:>8.1f} {ref['mem_gb']:>5.1f} "
                     f"{ours['tok_s'] / ref['tok_s']:>6.2f}")
        print(line, flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
