"""GPU shares from the cost model (mutransfer/cost): `resources: {gpus_per_trial: auto,
gpu_memory_gb: 80}` gives each trial the largest 1/k of a GPU that holds its estimated peak
memory with a margin, and a trial that cannot fit (on one GPU, or in the fixed share the
file gives it) is refused before the sweep starts, naming the width and the estimate.
Ray does not enforce GPU memory: a wrong share is an out-of-memory crash hours in. A CPU trial
run on this machine that its memory could never hold is refused the same way
(mutransfer/cost/machine.py), and on a cluster one that its largest node could never hold."""

from __future__ import annotations

import json
from typing import Any

from mutransfer.cost.machine import memory_bytes, trial_beyond_memory
from mutransfer.cost.table import SAFETY, cost_table, estimate_config, gpu_share, regime_of
from mutransfer.errors import UserError
from mutransfer.sweep.plan.cells import Plan
from mutransfer.sweep.plan.horizon import families, length_of
from mutransfer.sweep.plan.spec import Resources


def gpus_for(res: Resources, config: dict[str, Any]) -> float:
    """The GPUs a trial of `config` asks Ray for."""
    width = int(config["width"])
    if res.gpus_per_trial != "auto":
        return res.gpus_for(width)
    if regime_of(config) == "cpu":
        return 0.0
    share = gpu_share(estimate_config(config), float(res.gpu_memory_gb or 0))
    if share is None:
        raise UserError(_too_big(config, res))
    return share


def check_fit(res: Resources, configs: list[dict[str, Any]]) -> None:
    """UserError (one line) for the first width whose trials do not fit their GPU share."""
    if res.gpu_memory_gb is None:
        return
    seen: set[int] = set()
    for config in configs:
        width = int(config["width"])
        if width in seen or regime_of(config) == "cpu":
            continue
        seen.add(width)
        share = gpus_for(res, config)  # auto: raises when one GPU is too small
        # a trial trains on one device: a share of 2 GPUs holds no more of it than one does
        # (before, a fixed share >= 1 was never checked, and a trial one GPU cannot hold
        # started anyway, to end out of memory)
        if share > 0 and estimate_config(config).peak_gb * SAFETY > min(share, 1.0) * \
                res.gpu_memory_gb:
            raise UserError(_too_big(config, res, share))


def check_fits_here(configs: list[dict[str, Any]]) -> None:
    """UserError (one line) for the first CPU trial this machine's memory cannot hold, its
    model or one batch (a run on this machine; a GPU trial's share is check_fit's)."""
    check_fits_in(configs, memory_bytes(), "this machine")


def check_fits_in(configs: list[dict[str, Any]], memory: float | None, where: str) -> None:
    """UserError (one line) for the first CPU trial that `memory` bytes (of `where`: this
    machine, or a cluster's largest node) cannot hold, its model or one batch."""
    seen: set[tuple[int, str]] = set()
    for config in configs:
        train = config.get("train", {})
        key = (int(config["width"]), json.dumps([config.get("model", {}),
                                                 train.get("batch_size"), train.get("seq_len")],
                                                sort_keys=True))
        if key in seen or regime_of(config) != "cpu":
            continue
        seen.add(key)
        why = trial_beyond_memory(config, memory, where)
        if why:
            depth = config.get("model", {}).get("n_layer")
            raise UserError(f"width {key[0]}" + (f", n_layer {depth}" if depth else "")
                            + f": {why}")


def _too_big(config: dict[str, Any], res: Resources, share: float = 1.0) -> str:
    est = estimate_config(config)
    where = "one GPU" if share >= 1 else f"gpus_per_trial {share:g} of a GPU"
    return (f"resources: width {config['width']} needs an estimated {est.peak_gb:.1f} GB of "
            f"GPU memory ({est.weights_bytes / 1e9:.1f} weights and optimizer, "
            f"{est.activation_bytes / 1e9:.1f} activations, {est.workspace_bytes / 1e9:.1f} "
            f"loss workspace; x{SAFETY:g} margin), more than {where} of gpu_memory_gb "
            f"{res.gpu_memory_gb:g} holds; lower train.batch_size or seq_len"
            # auto gives a larger share, never more than one GPU: no hint where one is too small
            + (", or use gpus_per_trial auto" if share < 1 else ""))


def plan_configs(plan: Plan) -> list[dict[str, Any]]:
    """One config per trial the plan may run (an adaptive group: its budget of trials)."""
    if plan.adaptive:
        return [g.config for g in plan.groups for _ in range(g.budget)]
    return [c.config for c in plan.cells]


def plan_starts(plan: Plan) -> list[int]:
    """Per config of plan_configs, the step its training starts from: a horizon family's
    shorter lengths branch from its longest at their cooldown start, and train only from
    there (before, the table counted every length from step 0: 1.5x the tokens, FLOPs and
    GPU-hours of lengths T, 2T, 4T, beside the dry run's own line saying 0.657x)."""
    if plan.adaptive:
        return [0] * plan.n_trials
    branched = {c.trial_id: length_of(c.config)[1] for f in families(plan) for c in f.cells[1:]}
    return [branched.get(c.trial_id, 0) for c in plan.cells]


def plan_cost(plan: Plan, gpu: str | None = None, mfu: float | None = None) -> str:
    """`validate`'s and `--dry-run`'s cost table; GPU-hours on `gpu` (default: h100 for a
    sweep on cuda, none for a CPU sweep) or at `mfu` of its peak."""
    configs = plan_configs(plan)
    if not configs:
        return ""
    if mfu is not None and not 0 < mfu <= 1:
        raise UserError(f"--mfu {mfu:g}: give a fraction of the peak in (0, 1], e.g. 0.3")
    if gpu is None and regime_of(configs[0]) == "cuda":
        gpu = "h100"
    title = (f"the whole grid; a {plan.spec.search.kind} search runs a part of it"
             if plan.part_of_grid else "")
    try:
        return cost_table(configs, gpu=gpu, mfu=mfu, title=title, starts=plan_starts(plan))
    except UserError as exc:  # e.g. a tokenizer file not there yet: its vocabulary unknown
        if exc.args and "--gpu" in str(exc):
            raise
        return f"cost: not estimated ({exc})"
