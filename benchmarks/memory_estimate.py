"""The cost model's memory estimate (mutransfer/cost) against what a training step takes.

    python benchmarks/memory_estimate.py [--widths 256 512 1024 2048] [--vocab 256 50257]

On CUDA: one training step of the model as the trainer builds it (bf16 autocast, AdamW, the
device's scan backend), batch 32 x 512 as in sweeps/fineweb_width.yaml by default;
`torch.cuda.max_memory_allocated` over the step against the estimate's peak less its fixed
reserve (the CUDA context and allocator slack are not allocations). On CPU (no CUDA): the
bytes autograd saves in the forward (saved-tensor hooks) against the estimate's activations,
which is what tests/test_cost.py checks at small shapes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer.config import TrialConfig  # noqa: E402
from mutransfer.cost.model import Shape, estimate  # noqa: E402
from mutransfer.data.base import DataSpec  # noqa: E402
from mutransfer.models.build import build_model  # noqa: E402
from mutransfer.optim import make_optimizer  # noqa: E402
from mutransfer.train import loss_fn  # noqa: E402


def config(width: int, batch: int, seq_len: int, device: str) -> TrialConfig:
    model = {"n_layer": 3, "d_state": 16, "base_width": min(width, 256)}
    return TrialConfig(width=width, model=model,
                       train={"batch_size": batch, "seq_len": seq_len, "device": device})


def measure_cuda(cfg: TrialConfig, spec: DataSpec) -> float:
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    model = build_model(cfg, spec).to(device)
    opt = make_optimizer(model, cfg)
    b, n, v = cfg.train.batch_size, cfg.train.seq_len, spec.vocab_size
    x = torch.randint(0, v, (b, n), device=device)
    y = torch.randint(0, v, (b, n), device=device)
    for _ in range(2):  # the second step: the optimizer state exists
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn("ce")(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    del model, opt, loss
    return float(peak)


def measure_cpu_saved(cfg: TrialConfig, spec: DataSpec) -> float:
    model = build_model(cfg, spec)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in weights:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    b, n, v = cfg.train.batch_size, cfg.train.seq_len, spec.vocab_size
    x, y = torch.randint(0, v, (b, n)), torch.randint(0, v, (b, n))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn("ce")(model(x), y)
    return float(sum(seen.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--vocab", type=int, nargs="+", default=[256, 50257])
    ap.add_argument("--batch", type=int, default=None, help="default: 32 (CUDA), 4 (CPU)")
    ap.add_argument("--seq-len", type=int, default=None, help="default: 512 (CUDA), 128 (CPU)")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    batch = args.batch or (32 if cuda else 4)
    seq_len = args.seq_len or (512 if cuda else 128)
    what = ("peak allocated in a training step (CUDA)" if cuda else
            "bytes autograd saves in the forward (CPU)")
    print(f"{what}, 3 blocks, batch {batch} x {seq_len}")
    print("| width | vocab | params | estimate GB | measured GB | estimate / measured |")
    print("|---|---|---|---|---|---|")
    for vocab in args.vocab:
        spec = DataSpec(kind="tokens", vocab_size=vocab, input_dim=None, output_dim=vocab,
                        loss="ce")
        for width in args.widths:
            cfg = config(width, batch, seq_len, "cuda" if cuda else "cpu")
            est = estimate(Shape.of(cfg.model_dump(mode="json"), vocab),
                           "cuda" if cuda else "cpu")
            if cuda:
                measured = measure_cuda(cfg, spec)
                predicted = est.peak_bytes - est.reserve_bytes
            else:
                measured = measure_cpu_saved(cfg, spec)
                predicted = est.activation_bytes
            print(f"| {width} | {vocab} | {est.params:,} | {predicted / 1e9:.3f} | "
                  f"{measured / 1e9:.3f} | {predicted / measured:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
