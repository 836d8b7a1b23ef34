"""The cost model's memory estimate (mutransfer/cost) against what a training step takes.

    python benchmarks/memory_estimate.py [--widths 256 512 1024 2048] [--vocab 256 50257]

On CUDA: one training step of the model as the trainer builds it (bf16 autocast, AdamW, the
device's scan backend), batch 32 x 512 as in sweeps/fineweb_width.yaml by default;
`torch.cuda.max_memory_allocated` over the step against the estimate's peak less its fixed
reserve (the CUDA context and allocator slack are not allocations). On CPU (no CUDA): the
bytes autograd saves in the forward (saved-tensor hooks) against the estimate's activations,
which is what tests/test_cost.py checks at small shapes.

    python benchmarks/memory_estimate.py --rss [--steps 6]

CPU peak RSS: each shape of RSS_GRID runs as `run_trial` runs it (1 thread, the stdlib corpus,
or random tokens of a larger vocabulary) in a fresh process that has first run a tiny trial
(the modules a trial imports: its RSS then is the process's own, the estimate's reserve); the
growth of the peak RSS (VmHWM, reset before the trial) against the estimate's peak less that
reserve.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
from mutransfer import train  # noqa: E402
from mutransfer.config import TrialConfig  # noqa: E402
from mutransfer.cost.model import Shape, estimate  # noqa: E402
from mutransfer.data.base import DataSpec  # noqa: E402
from mutransfer.data.memory import MemorySource  # noqa: E402
from mutransfer.models.build import build_model  # noqa: E402
from mutransfer.optim import make_optimizer  # noqa: E402
from mutransfer.train import loss_fn, run_trial  # noqa: E402

# (arch, width, n_layer, batch, seq_len, vocab: None for the stdlib corpus's 256 bytes)
RSS_GRID = [("mamba", w, 2, 8, 128, None) for w in (64, 128, 256, 512, 1024)] + [
    ("mamba", 256, 4, 8, 128, None), ("mamba", 128, 8, 8, 128, None),
    ("mamba", 256, 2, 4, 512, None), ("mamba", 1024, 2, 2, 512, None),
    ("mamba", 128, 2, 16, 256, None), ("mamba", 512, 2, 16, 256, None),
    ("mamba", 64, 2, 8, 128, 50257), ("mamba", 512, 2, 8, 128, 50257),
    ("mamba2", 64, 2, 8, 128, None), ("mamba2", 256, 2, 8, 128, None),
    ("mamba2", 1024, 2, 8, 128, None), ("mamba2", 256, 4, 8, 128, None),
    ("s4d", 256, 2, 8, 128, None), ("mamba", 64, 2, 2, 64, None),
    ("mamba", 256, 2, 24, 1024, None)]  # its blocks' tensors over glibc's 32 MiB: mmapped


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


def rss_config(arch: str, width: int, n_layer: int, batch: int, seq_len: int,
               steps: int = 6) -> dict:
    """A CPU trial as a sweep runs it (AdamW, grad clipping, an eval every 3 steps)."""
    return TrialConfig(width=width, model={"arch": arch, "n_layer": n_layer, "base_width": 64},
                       train={"batch_size": batch, "seq_len": seq_len, "steps": steps,
                              "eval_every": 3}).model_dump(mode="json")


def _status(key: str) -> int:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"{key}:\s+(\d+)", text).group(1)) * 1024


def _random_source(vocab: int) -> MemorySource:
    rng = np.random.default_rng(0)
    dtype = np.uint16 if vocab <= 1 << 16 else np.int32
    return MemorySource("random", rng.integers(0, vocab, 1 << 20).astype(dtype),
                        rng.integers(0, vocab, 1 << 16).astype(dtype), vocab, "random tokens")


def rss_child(config: dict, vocab: int | None) -> dict[str, int]:
    """In a fresh process: run a tiny trial (what a first trial imports, its data), then
    `config`'s trial; its RSS before and the peak RSS during it (Linux)."""
    torch.set_num_threads(1)  # what a sweep's trial gets (OMP_NUM_THREADS=1)
    if vocab is not None:
        source = _random_source(vocab)
        train.load_data = lambda _cfg: source  # the trainer's path with another vocabulary
    cfg = TrialConfig.model_validate(config)
    run_trial(TrialConfig(width=32, model={"arch": cfg.model.arch, "n_layer": 1,
                                           "base_width": 32},
                          train={"batch_size": 1, "seq_len": 8, "steps": 1, "eval_every": 1,
                                 "eval_batches": 1}))
    gc.collect()
    base = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    run_trial(cfg)
    return {"base": base, "peak": _status("VmHWM")}


def trial_rss(config: dict, vocab: int | None = None) -> dict[str, int]:
    """rss_child's numbers, from a fresh process (bytes: base, peak)."""
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps([config, vocab])],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rss_table(steps: int) -> None:
    reserve = estimate(Shape.of(rss_config("mamba", 64, 2, 8, 128), 256), "cpu").reserve_bytes
    print(f"CPU peak RSS growth of a trial ({steps} steps, eval every 3, 1 thread) against "
          f"the estimate's peak less its {reserve / 1e9:.2f} GB reserve")
    print("| arch | width | n_layer | batch x seq_len | vocab | base GB | estimate MB "
          "| measured MB | estimate / measured | old estimate / measured |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for arch, width, n_layer, batch, seq_len, vocab in RSS_GRID:
        config = rss_config(arch, width, n_layer, batch, seq_len, steps)
        est = estimate(Shape.of(config, vocab or 256), "cpu")
        predicted = est.peak_bytes - est.reserve_bytes
        old = est.weights_bytes + est.activation_bytes + est.workspace_bytes
        m = trial_rss(config, vocab)
        grown = m["peak"] - m["base"]
        print(f"| {arch} | {width} | {n_layer} | {batch} x {seq_len} | {vocab or 256} | "
              f"{m['base'] / 1e9:.2f} | {predicted / 1e6:,.1f} | {grown / 1e6:,.1f} | "
              f"{predicted / grown:.2f} | {old / grown:.2f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--child"]:
        print(json.dumps(rss_child(*json.loads(sys.argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rss", action="store_true", help="CPU: peak RSS of run_trial per shape")
    ap.add_argument("--steps", type=int, default=6, help="--rss: steps per trial")
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--vocab", type=int, nargs="+", default=[256, 50257])
    ap.add_argument("--batch", type=int, default=None, help="default: 32 (CUDA), 4 (CPU)")
    ap.add_argument("--seq-len", type=int, default=None, help="default: 512 (CUDA), 128 (CPU)")
    args = ap.parse_args(argv)
    if args.rss:
        rss_table(args.steps)
        return 0
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
