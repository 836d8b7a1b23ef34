"""A sweep's cost, per width: parameters, peak memory, trials, tokens, FLOPs, GPU-hours; and
the GPU share `resources: {gpus_per_trial: auto}` gives a trial."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mutransfer.config import BUILTIN_ARCHS
from mutransfer.cost.gpus import GPU, gpu_named, seconds_per_token
from mutransfer.cost.model import Estimate, Regime, Shape, estimate
from mutransfer.cost.vocab import data_sizes
from mutransfer.errors import UserError

SAFETY = 1.2  # packing leaves 20% of a GPU's memory beyond the estimate (fragmentation, error)


def regime_of(config: dict[str, Any]) -> Regime:
    return "cpu" if config.get("train", {}).get("device", "cpu") == "cpu" else "cuda"


def shape_of(config: dict[str, Any]) -> Shape:
    vocab, input_dim, output_dim = data_sizes(config.get("data", {}))
    return Shape.of(config, vocab, input_dim, output_dim)


def arch_of(config: dict[str, Any]) -> str:
    return str(config.get("model", {}).get("arch", "mamba"))


def counted(config: dict[str, Any]) -> bool:
    """Whether the cost model counts the config's model: the built-in archs only. A
    package.module:factory model is not built here (that would run the user's code), and
    counting it as one of the built-in blocks gave its parameters wrong (examples/tiny_gpt
    at width 64: 39.6k printed, 135.8k built)."""
    return arch_of(config) in BUILTIN_ARCHS


def estimate_config(config: dict[str, Any], regime: Regime | None = None) -> Estimate:
    """The estimate of one trial config (a dict as TrialConfig dumps it); UserError for a
    model the cost model does not count (a package.module:factory arch)."""
    if not counted(config):
        raise UserError(f"model {arch_of(config)}: the cost model estimates the memory of the "
                        f"built-in archs ({', '.join(BUILTIN_ARCHS)}) only, so "
                        f"resources.gpu_memory_gb cannot size or check this model's GPU share; "
                        f"give gpus_per_trial as a number of GPUs and leave gpu_memory_gb out")
    return estimate(shape_of(config), regime or regime_of(config))


def gpu_share(est: Estimate, gpu_memory_gb: float) -> float | None:
    """1/k of a GPU for the largest k with k x SAFETY x peak within its memory; None when
    one trial does not fit."""
    k = math.floor(gpu_memory_gb * 1e9 / (SAFETY * est.peak_bytes))
    return None if k < 1 else 1.0 / k


@dataclass
class Row:
    width: int
    params: int  # the fewest of the width's trials (an n_layer, d_state or arch axis: several)
    peak_gb: float
    params_max: int = 0  # the most (printed as a range where it differs from params)
    trials: int = 0
    tokens: float = 0.0
    flops: float = 0.0
    gpu_hours: float = 0.0
    counted: bool = True  # False: a factory model's trials are among them (params, memory,
    # FLOPs and GPU-hours unknown)


def cost_rows(configs: Iterable[dict[str, Any]], gpu: GPU | None, mfu: float | None,
              starts: Sequence[int] | None = None) -> list[Row]:
    """One row per width; `starts`: per config, the step its training starts from (a horizon
    branch's cooldown start; None: every trial from step 0)."""
    rows: dict[int, Row] = {}
    for i, config in enumerate(configs):
        shape = shape_of(config)
        est = estimate(shape, regime_of(config), starts[i] if starts else 0)
        width = int(config["width"])
        row = rows.setdefault(width, Row(width, est.params, est.peak_gb, est.params))
        if not counted(config):
            row.counted = False
        # a width's trials may be different models (before, the row printed the first one's
        # parameters: 81.9k for n_layer 2 and 8 alike)
        row.params, row.params_max = min(row.params, est.params), max(row.params_max, est.params)
        row.peak_gb = max(row.peak_gb, est.peak_gb)
        row.trials += 1
        row.tokens += est.train_tokens
        row.flops += est.flops
        if gpu is not None:
            tokens = est.train_tokens + est.eval_tokens / 3  # an eval token: a forward only
            row.gpu_hours += tokens * seconds_per_token(gpu, shape, mfu) / 3600
    return [rows[w] for w in sorted(rows)]


def cost_table(configs: list[dict[str, Any]], gpu: str | None = "h100",
               mfu: float | None = None, title: str = "",
               starts: Sequence[int] | None = None) -> str:
    """The per-width table with its total, as text. `gpu` None: no GPU-hours (a CPU sweep);
    the peak memory is then the CPU regime's. `starts`: as cost_rows's."""
    if mfu is not None and not gpu:  # --mfu alone: the hours on the default GPU, not none
        gpu = "h100"
    device = gpu_named(gpu) if gpu else None
    rows = cost_rows(configs, device, mfu, starts)
    regime = regime_of(configs[0]) if configs else "cuda"
    mem = "est. peak GPU mem" if regime == "cuda" else "est. peak RAM"
    head = ["width", "params", mem, "trials", "tokens", "FLOPs"]
    if device is not None:
        head.append(f"{device.name.upper()} GPU-h")
    lines = [head]
    for r in rows:
        cells = [str(r.width), _params(r) if r.counted else "?",
                 _n(r.peak_gb * 1e9) + "B" if r.counted else "?", str(r.trials),
                 _n(r.tokens), _n(r.flops) if r.counted else "?"]
        if device is not None:
            cells.append(_hours(r.gpu_hours) if r.counted else "?")
        lines.append(cells)
    whole = all(r.counted for r in rows)
    total = ["total", "", "", str(sum(r.trials for r in rows)),
             _n(sum(r.tokens for r in rows)), _n(sum(r.flops for r in rows)) if whole else "?"]
    if device is not None:
        total.append(_hours(sum(r.gpu_hours for r in rows)) if whole else "?")
    lines.append(total)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = [("  ".join(c.rjust(w) for c, w in zip(line, widths))).rstrip() for line in lines]
    how = ("" if device is None else
           f"; GPU-hours at {mfu:.0%} of the {device.name.upper()}'s peak" if mfu is not None
           else f"; GPU-hours from the measured {device.name.upper()} throughput, "
                f"benchmarks/README.md")
    note = (f"cost{': ' + title if title else ''} (estimates, mutransfer/cost{how}; "
            f"peak memory per trial, one process)")
    factories = sorted({arch_of(c) for c in configs if not counted(c)})
    if factories:
        text.append(f"?: not estimated for model {', '.join(factories)} (the cost model counts "
                    f"the built-in archs {', '.join(BUILTIN_ARCHS)}; a factory's model is not "
                    f"built here)")
    return "\n".join([note, *text])


def _hours(h: float) -> str:
    return f"{h:,.1f}" if h >= 10 else f"{h:.2f}"


def _params(r: Row) -> str:
    lo, hi = _n(r.params), _n(r.params_max)
    return lo if lo == hi else f"{lo}-{hi}"


def _n(x: float) -> str:
    # judged on the rounded figure: 999,968 is 1.0M (before, "1000.0k")
    for unit, size in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6),
                       ("k", 1e3)):
        if round(x / size, 1) >= 1:
            return f"{x / size:.1f}{unit}"
    return f"{x:.0f}"
