"""`mutransfer train CONFIG.yaml [--set key=value ...]`: one trial with a progress display."""

from __future__ import annotations

import json
import math
import os
import sys
import time

# top-level keys of a sweep file that a trial config does not have
SWEEP_KEYS = ("name", "axes", "resources", "search", "retries", "storage", "loggers")


def add_arguments(p, name: str) -> None:
    p.add_argument("config", help="trial config (YAML): width, model, param, train, data; "
                                  "e.g. configs/train.yaml")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field by dotted path, e.g. train.lr=0.003 (repeatable)")
    p.add_argument("--out", default=None,
                   help="write the result as JSON to this file (standard JSON: a loss that is "
                        "not a finite number, such as step 0's train loss or a diverged "
                        "trial's, is null)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch CPU threads (default: $OMP_NUM_THREADS, else 1: what a sweep "
                        "trial runs with at resources.cpus_per_trial 1, so that a stored cell "
                        "re-run here gives its losses bit for bit on the CPU; a trial's own "
                        "count is env.torch_threads in the trials table; 0: torch's default, "
                        "every core)")


def load_trial_config(path: str, sets: list[str]):
    from mutransfer.config import TrialConfig
    from mutransfer.configbase import parse_set, read_yaml, set_dotted, validate
    from mutransfer.errors import UserError

    data = read_yaml(path)
    if not data:  # before: every field at its default, a 200-step trial nobody asked for
        raise UserError(f"{path}: empty; a trial config sets width, model, param, train and "
                        f"data (e.g. configs/train.yaml)")
    problem = not_a_trial_config(data, path)
    if problem:
        raise UserError(problem)
    for key, value in parse_set(sets):
        set_dotted(data, key, value)
    return validate(TrialConfig, data, source=path)


def not_a_trial_config(data: dict, path: str,
                       wanted: str = "`mutransfer train` one trial's config") -> str | None:
    """The one-line refusal of a check or sweep file (`data`, read from `path`) given where a
    trial config belongs, naming the command that runs it; else None. `wanted`: what to give
    instead (autocorr --data takes a data config too). Pydantic alone would say only "name:
    Extra inputs are not permitted"."""
    if "check" in data:
        return (f"{path} is a check file (it has check), not a trial config: run it with "
                f"`mutransfer check {path}`, or give {wanted} (e.g. configs/train.yaml)")
    sweep_keys = [k for k in SWEEP_KEYS if k in data]
    if sweep_keys:
        return (f"{path} is a sweep file (it has {', '.join(sweep_keys)}), not a trial "
                f"config: run it with `mutransfer sweep {path}`, or give {wanted} (e.g. "
                f"configs/train.yaml)")
    return None


class Progress:
    """One refreshing status line on a terminal, a line per eval otherwise."""

    def __init__(self, total: int, stream=None) -> None:
        from mutransfer.statusline import StatusLine

        # sys.stderr looked up now: tests may swap it
        self.status = StatusLine(stream or sys.stderr)
        self.total, self.t0 = total, time.perf_counter()

    def __call__(self, point: dict) -> None:
        step = point["step"]
        elapsed = time.perf_counter() - self.t0
        eta = f"{elapsed / step * (self.total - step):4.0f}s" if step else "  --"
        train = "   --  " if step == 0 else f"{point['train_loss']:.4f}"
        line = (f"step {step:>6}/{self.total}  train {train}  "
                f"eval {point['eval_loss']:.4f}  lr {point['lr']:.3g}  "
                f"{point['tokens_per_s']:,.0f} tok/s  {elapsed:5.0f}s  ETA {eta}")
        bar = "#" * int(30 * step / self.total)
        self.status.draw(f"[{bar:<30}] {line}" if self.status.tty else line)

    def close(self) -> None:
        self.status.close()


# The torch threads of a sweep trial at the default resources.cpus_per_trial (1): Ray sets
# OMP_NUM_THREADS to a trial's CPUs, and torch takes its thread count from it. The sum of a
# matrix product depends on how its rows are split among threads (last bits of a float32).
SWEEP_TRIAL_THREADS = 1
# The most torch threads a trial asks for: more than any machine's cores. At 10^5 the OpenMP
# runtime cannot start them and the process dies (a segmentation fault, no message).
MAX_THREADS = 1024


def trial_threads(option: int | None) -> int:
    """--threads, else $OMP_NUM_THREADS (set by Ray in a sweep's workers and honoured by
    torch), else a sweep trial's default; 0: torch's own default."""
    from mutransfer.errors import UserError

    given = "--threads"
    if option is None:
        env = os.environ.get("OMP_NUM_THREADS", "")
        option = int(env) if env.isdigit() and int(env) > 0 else SWEEP_TRIAL_THREADS
        given = "OMP_NUM_THREADS="
    if option < 0:
        raise UserError(f"--threads {option}: give 1 or more (0: torch's default)")
    if option > MAX_THREADS:
        name = f"{given}{option}" if given.endswith("=") else f"{given} {option}"
        raise UserError(f"{name}: more threads than any machine has cores (at most "
                        f"{MAX_THREADS}; 0: torch's default, every core)")
    return option


def beyond_memory(cfg) -> str | None:
    """Why the trial cannot fit in this machine's memory, before its data loads or its model
    is built (a 10^5-layer model was built without end; a batch of 10^9 sequences ended in
    numpy's MemoryError traceback): cost/machine.py's bounds, as a sweep and coord-check
    refuse them."""
    from mutransfer.cost.machine import memory_bytes, trial_beyond_memory

    why = trial_beyond_memory(cfg.model_dump(), memory_bytes())
    return f"width {cfg.width}: {why}" if why else None


def run(args) -> int:
    threads = trial_threads(args.threads)
    if args.out is not None:  # before training: a crash must not lose the run's result
        from mutransfer.commands.outputs import (
            check_not_an_input,
            check_output_file,
            check_outside_store_tables,
        )

        check_outside_store_tables(args.out)  # first: the probe of the file opens it
        check_output_file(args.out)
        check_not_an_input(args.out, [args.config])
    cfg = load_trial_config(args.config, args.sets)
    why = beyond_memory(cfg)
    if why:
        from mutransfer.errors import UserError

        raise UserError(f"{args.config}: {why}")
    if not cfg.model.builtin:  # what a sweep checks of a factory's model, before training
        from mutransfer.data import load_data
        from mutransfer.models.factory import probe

        probe(cfg, load_data(cfg.data).spec)
    from mutransfer.train import run_trial

    if threads:
        import torch

        torch.set_num_threads(threads)
    progress = Progress(cfg.train.total_steps)
    try:
        result = run_trial(cfg, report=progress)
    finally:  # a Ctrl-C or an error ends the status line: its message gets a line of its own
        progress.close()
    if result.diverged:
        print(f"status diverged at step {result.diverge_step} ({result.diverge_reason}): "
              f"last finite loss {result.last_finite_loss:.4f}, initial "
              f"{result.initial_loss:.4f}; no final loss, {result.steps_done} steps, "
              f"{result.wall_time_s:.1f} s")
    else:
        print(f"status {result.status}: eval loss {result.initial_loss:.4f} -> "
              f"{result.final_eval_loss:.4f} (best {result.best_eval_loss:.4f}), "
              f"{result.steps_done} steps, {result.tokens:,} tokens, "
              f"{result.wall_time_s:.1f} s, {result.tokens_per_s:,.0f} tok/s")
        if result.steps_above_bound:
            print(f"unstable but trained: the smoothed train loss rose up to "
                  f"+{result.max_excursion:.2f} nats over the initial loss and stayed above "
                  f"initial + {cfg.train.diverge_delta:g} for {result.steps_above_bound} "
                  f"steps, then recovered")
    if args.out is not None:
        from mutransfer.commands.outputs import write_result

        write_result(args.out, result_json(result.to_dict()))
    return 0


def result_json(result: dict) -> str:
    """The result as standard JSON: NaN and ±inf (step 0's train loss, a diverged trial's
    losses) are null. json.dumps writes them as the bare words NaN and Infinity, which no
    JSON parser but Python's reads (JavaScript's JSON.parse and Go's encoding/json refuse
    the whole file)."""
    return json.dumps(_finite(result), indent=1, allow_nan=False)


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
