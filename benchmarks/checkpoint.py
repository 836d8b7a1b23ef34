"""Trial checkpoints: size, save and load time per width, and the resumed-trial equality.

    python benchmarks/checkpoint.py [--widths 256 512 1024] [--store /tmp/ckpt-bench]

Part 1 runs the real trainer (`run_trial`, 3 Mamba blocks as in sweeps/fineweb_width.yaml, the
built-in byte corpus) for 2 steps with an eval point at step 1, checkpointing into a real store
(`TrialCheckpoint`, local filesystem) at that point, and reports the file's size, the time
`save` took (torch.save streamed through the store's pyarrow filesystem) and the time `load`
takes. Model + AdamW's two moments are 12 bytes per parameter; the last column estimates the
size with the GPT-2 vocabulary of the FineWeb sweep (50257 tokens, tied embedding).

Part 2 (`--equality`) runs one trial straight through and one killed after an eval point and
resumed through `run_unit`, and prints both runs' losses side by side.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from mutransfer.config import TrialConfig
from mutransfer.results.checkpoints import TrialCheckpoint
from mutransfer.results.store import Attempt, Store, read_tables
from mutransfer.sweep.run.trainable import TrialUnit, run_unit
from mutransfer.train import run_trial

GPT2_VOCAB, BYTE_VOCAB = 50257, 256


class Timed(TrialCheckpoint):
    """Saves at every eval point offered and records how long each save took."""

    def __init__(self, store: Store, tid: str):
        super().__init__(store, tid, max_overhead=None)
        self.save_s: list[float] = []

    def save(self, state):
        t0 = time.perf_counter()
        done = super().save(state)
        self.save_s.append(time.perf_counter() - t0)
        return done


def config(width: int, steps: int = 2, eval_every: int = 1) -> TrialConfig:
    return TrialConfig(width=width, model={"n_layer": 3, "base_width": 64},
                       train={"optimizer": "adamw", "lr": 1e-3, "steps": steps,
                              "batch_size": 2, "seq_len": 32, "eval_every": eval_every,
                              "eval_batches": 1})


def sizes(root: Path, widths: list[int]) -> None:
    print(f"{'width':>6} {'model numel':>11} {'file MB':>9} {'save s':>8} {'MB/s':>7} "
          f"{'load s':>8} {'est. MB at GPT-2 vocab':>23}")
    for width in widths:
        cfg = config(width)
        store = Store(root / f"w{width}")
        ckpt = Timed(store, "bench")
        run_trial(cfg, checkpoint=ckpt)
        size = store.fs.get_file_info(ckpt.path).size
        t0 = time.perf_counter()
        state = ckpt.load()
        load_s = time.perf_counter() - t0
        params = sum(t.numel() for t in state["model"].values() if t.is_floating_point())
        extra = (GPT2_VOCAB - BYTE_VOCAB) * width  # the tied embedding's extra rows
        est = size + 12 * extra
        print(f"{width:>6} {params:>11,} {size / 1e6:>9.1f} {ckpt.save_s[0]:>8.3f} "
              f"{size / 1e6 / ckpt.save_s[0]:>7.0f} {load_s:>8.3f} {est / 1e6:>23.0f}")
        del state
        shutil.rmtree(root / f"w{width}", ignore_errors=True)


class Killed(Exception):
    pass


def equality(root: Path, steps: int, every: int, kill_after: int) -> None:
    cfg = TrialConfig(width=64, model={"n_layer": 2, "base_width": 64},
                      train={"optimizer": "adamw", "lr": 4e-3, "steps": steps,
                             "batch_size": 8, "seq_len": 64, "eval_every": every,
                             "eval_batches": 2, "warmup": 6, "schedule": "cosine"})
    payload = TrialUnit.of(cfg.model_dump(mode="json"), {})
    run_unit(payload, str(root / "straight"), "bench")
    original = Attempt.write_step

    def die_after(self, point):
        original(self, point)
        if point["step"] == kill_after:
            raise Killed

    Attempt.write_step = die_after
    try:
        run_unit(payload, str(root / "resumed"), "bench", save_every_eval=True)
    except Killed:
        pass
    finally:
        Attempt.write_step = original
    metrics = run_unit(payload, str(root / "resumed"), "bench")
    a, b = read_tables(root / "straight").steps, read_tables(root / "resumed").steps
    print(f"width 64, {steps} steps, eval every {every}: killed after the report of step "
          f"{kill_after}, resumed from the checkpoint of step {metrics['resumed_from']}")
    print(f"{'step':>5} {'train straight':>15} {'train resumed':>15} {'eval straight':>15} "
          f"{'eval resumed':>15} {'identical':>9}")
    for (_, x), (_, y) in zip(a.iterrows(), b.iterrows()):
        same = (x["eval_loss"] == y["eval_loss"]) and (
            x["train_loss"] == y["train_loss"] or x["train_loss"] != x["train_loss"])
        print(f"{x['step']:>5} {x['train_loss']:>15.10f} {y['train_loss']:>15.10f} "
              f"{x['eval_loss']:>15.10f} {y['eval_loss']:>15.10f} {str(same):>9}")
    cols = ["step", "train_loss", "eval_loss", "grad_norm", "lr"]
    print("all step rows bit-identical:", a[cols].equals(b[cols]),
          "| checkpoints left:", list((root / "resumed" / "checkpoints").glob("*")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--store", default=None, help="folder for the stores (default: a temp dir)")
    ap.add_argument("--equality", action="store_true", help="also run part 2")
    args = ap.parse_args()
    root = Path(args.store or tempfile.mkdtemp(prefix="mt-ckpt-bench-"))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, store {root}")
    run_trial(config(64))  # warm-up: data load, allocator
    sizes(root, args.widths)
    if args.equality:
        equality(root, steps=60, every=10, kill_after=30)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
