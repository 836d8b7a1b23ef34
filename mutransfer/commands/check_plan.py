"""What `mutransfer check FILE` would run, and everything it refuses before running anything:
the check file and its options, the output folder and the store of its transfer stage, the
trials' configs against this machine's memory, the transfer stage's sweep, a budget too small
for one seed set (`checked`); what it would run, in a few lines (`describe`). `check` runs it
first (commands/check.py); `validate`, `prepare` and `doctor` run it on a check file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutransfer.errors import UserError


@dataclass
class Budget:
    steps: int | None = None
    minutes: float | None = None


def parse_budget(text: str | None) -> Budget:
    if text is None:
        return Budget()
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(m|min)?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"--budget {text}: give trial-steps (e.g. 20000) or minutes (e.g. 10m)")
    if m.group(2):
        return Budget(minutes=float(m.group(1)))
    if not m.group(1).isdigit():
        raise UserError(f"--budget {text}: trial-steps is a whole number (e.g. 20000); "
                        "minutes take an m (e.g. 10.5m)")
    return Budget(steps=int(m.group(1)))


def _trial_configs(spec, source: str):
    """Validated TrialConfigs of the coordinate stage (one per width and seed)."""
    from mutransfer.config import TrialConfig
    from mutransfer.configbase import validate
    from mutransfer.coord.settings import DEFAULT_LR

    c = spec.check.coord
    opt = spec.train.get("optimizer", "adamw")
    lr = c.lr or DEFAULT_LR["sgd" if opt == "sgd" else "adam"]
    out = []
    for width in spec.check.widths:
        for seed in c.seeds:
            data = spec.trial(width, lr=lr, seed=seed, grad_clip=None, batch_size=c.batch_size,
                              seq_len=c.seq_len, warmup=0, schedule="constant")
            out.append(validate(TrialConfig, data, source=source))
    return out, lr


def _beyond_memory(spec, configs, coord_only: bool) -> str | None:
    """Why the model at the widest width, a batch of the coordinate stage (`configs`: its
    trial configs) or of the transfer stage (unless `coord_only`) cannot fit in this machine's
    memory, before any data loads (before: numpy's MemoryError traceback at the first batch;
    a model of width 10^9 was refused only once the token cache was made). A train section
    that does not validate is left to the transfer stage's plan, which names its field."""
    from pydantic import ValidationError

    from mutransfer.config import TrainConfig
    from mutransfer.cost.machine import batch_beyond_memory, beyond_memory, memory_bytes

    memory = memory_bytes()
    widest = configs[-1]
    why = beyond_memory(widest.model_dump(), memory)
    if why:
        return f"width {widest.width}: {why}"
    coord = configs[0]
    why = batch_beyond_memory(coord.train.batch_size, coord.train.seq_len,
                              ("check.coord.batch_size", "check.coord.seq_len"), memory)
    if why or coord_only:
        return why
    try:
        train = TrainConfig.model_validate(spec.train)
    except ValidationError:
        return None
    return batch_beyond_memory(train.batch_size, train.seq_len,
                               ("train.batch_size", "train.seq_len"), memory)


@dataclass
class Checked:
    """A check file and its options as `check` runs them, refused (UserError) where `check`
    would refuse them before it runs anything: `plan`, the transfer stage's sweep (None with
    --coord-only), runs `least` to `most` trials of `steps` steps in its first round."""

    file: str
    spec: Any
    out: Path
    budget: Budget
    configs: list
    lr: float
    plan: Any = None
    least: int = 0
    typical: int = 0
    most: int = 0
    steps: int = 0


def checked(file: str, out: str | None = None, budget: str | None = None,
            coord_only: bool = False, max_cells: int | None = None) -> Checked:
    """Everything `check FILE` refuses from the file and its options alone, before any data
    loads, any model is built or anything is written: the file, the output folder (and the
    store its transfer stage would write), the trials' configs, this machine's memory, the
    transfer stage's sweep and a budget too small for one seed set. `validate` runs it too."""
    from mutransfer.commands.check_spec import load_check, local_folder_problem
    from mutransfer.commands.outputs import check_output_dir, check_outside_store_tables

    spec = load_check(file)
    if out:
        try:
            local_folder_problem(out)
        except ValueError as exc:
            raise UserError(f"--out {exc}") from None
    option = ("--out" if out is not None else f"{file}: storage" if spec.storage is not None
              else f"{file}: output folder")  # where the folder was named
    if out is not None:
        spec = spec.model_copy(update={"storage": out})
    parsed = parse_budget(budget)
    given = out if out is not None else spec.storage or spec.out  # as written, '' not '.'
    check_output_dir(given, option)
    named = f"{option} {given}"
    _check_store(spec.out, named)
    # the tables of a store made before the marker, which `_check_store` (a store with the
    # marker above the transfer stage's) does not see: the files went into its trials/
    check_outside_store_tables(given, option)
    configs, lr = _trial_configs(spec, file)
    why = _beyond_memory(spec, configs, coord_only)
    if why:
        raise UserError(f"{file}: {why}")
    c = Checked(file, spec, spec.out, parsed, configs, lr)
    if coord_only:
        _check_transfer_fields(spec, file)
        _keep_full_verdict(spec.out, named)
        return c
    c.plan = transfer_plan(spec, file, max_cells)
    _first_round(c)
    return c


def _keep_full_verdict(out: Path, where: str) -> None:
    """`--coord-only` writes verdict.json and report.html: into a folder whose verdict has a
    transfer stage it would replace that answer with an INCONCLUSIVE (before: silently)."""
    try:
        record = json.loads((out / "verdict.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or not ours to read: nothing to keep
        return
    if isinstance(record, dict) and record.get("rounds"):
        raise UserError(f"{where}: holds a full check (verdict {record.get('verdict')}); "
                        "--coord-only would replace it: give another --out")


def _check_store(out: Path, where: str) -> None:
    """The transfer stage's store, OUT/sweep, is one `sweep` would write: not a file nor a
    folder of other files, and OUT not inside another results store (before: refused by the
    transfer stage, after the coordinate stage had written its files there)."""
    from mutransfer.results.store import Store

    try:
        Store(out / "sweep").check_is_store()
    except UserError as exc:  # "storage PATH: why": the option or field named it, not storage
        raise UserError(f"{where}: {re.sub('^storage ', '', str(exc))}") from None


def transfer_plan(spec, file: str, max_cells: int | None = None):
    """The plan of the check's transfer stage (a sweep), its refusals named in the check
    file's fields."""
    from mutransfer.sweep.run.driver import prepare

    return _in_the_files_terms(file, prepare, spec.sweep(), check_data=False,
                               max_cells=max_cells)


def _check_transfer_fields(spec, file: str) -> None:
    """The transfer stage's grid read as the full check reads it (a negative or repeated LR, a
    repeated seed): `--coord-only` runs no transfer stage, but the file is one, and a run that
    wrote its coordinate outputs would leave the full check to refuse it later. Its size, its
    data and this machine are the full run's concern."""
    from mutransfer.configbase import validate
    from mutransfer.sweep.plan.cells import build_plan
    from mutransfer.sweep.plan.spec import SweepSpec

    _in_the_files_terms(file, lambda: build_plan(validate(SweepSpec, spec.sweep(),
                                                          source="sweep"), source="sweep"))


def check_transfer_data(plan, file: str) -> None:
    """The transfer stage's data is there and holds a batch of each shape (its sweep has no
    loggers to check)."""
    from mutransfer.sweep.run.driver import check_data_present

    _in_the_files_terms(file, check_data_present, plan)


def _in_the_files_terms(file: str, step, *args, **kw):
    try:
        return step(*args, **kw)
    except UserError as exc:  # the sweep is ours: name the check file's fields, not its own
        raise UserError(_check_fields(str(exc), file)) from None


def _first_round(c: Checked) -> None:
    """The first round's trials (least, typical, most) and steps; a trial-steps budget that
    cannot hold the coordinate stage and one seed set is refused."""
    from mutransfer.config import TrialConfig
    from mutransfer.sweep.search.transfer.decisions import TransferSearch

    plan = c.plan
    c.least, c.typical, c.most = TransferSearch.of_cells(plan.cells, plan.spec.search,
                                                         {}).bounds()
    c.steps = TrialConfig.model_validate(plan.cells[0].config).train.total_steps \
        if plan.cells else 0
    coord_steps = len(c.configs) * c.spec.check.coord.steps
    max_steps = c.budget.steps if c.budget.steps is not None else \
        c.spec.check.budget.trial_steps
    what = "--budget" if c.budget.steps is not None else "check.budget.trial_steps"
    if max_steps is not None and coord_steps + c.least * c.steps > max_steps:
        raise UserError(f"{what} {max_steps}: too small for one seed set: the check needs "
                        f"at least "
                        f"{coord_steps + c.least * c.steps:,} trial-steps ({coord_steps} "
                        f"coordinate + {c.least} trials x {c.steps} steps); raise it, or give "
                        f"fewer widths, seeds or steps")


# sp claims no transfer: a check of it answers FAIL (the file's param section, or its default)
SP_NOTE = (": the standard parameterization claims no transfer, so FAIL is its expected "
           "verdict; set param: {name: mup_ssm} (or mup, spectral) to check one that does")


def describe(c: Checked) -> str:
    """What the check would run, a few indented lines (`validate`)."""
    from mutransfer.sweep.plan.spec import LRRange

    k = c.spec.check
    lrs = sorted({float(cell.config["train"]["lr"]) for cell in c.plan.cells})
    grid = (f"2^{k.lr.log2[0]:g} .. 2^{k.lr.log2[1]:g}, {k.lr.per_octave} per octave"
            if isinstance(k.lr, LRRange) else ", ".join(f"{lr:g}" for lr in lrs))
    rounds = k.seed_rounds()
    first = rounds[0]
    seeds = (f"seeds {seed_text(first)}, then {len(first)} more a round while the drift is "
             f"undecided, up to {len(rounds[-1])} seeds ({len(rounds)} rounds)"
             if len(rounds) > 1 else f"seeds {seed_text(first)} (one round)")
    budget = [f"{k.budget.minutes:g} min from the start" if k.budget.minutes else "",
              f"{k.budget.trial_steps:,} trial-steps" if k.budget.trial_steps else "",
              f"{_count(k.budget.seeds, 'seed')} in all"]
    name = c.configs[0].param.name
    return "\n".join([
        f"  parameterization {name}{'' if c.spec.param else ' (the default: no param section)'}"
        f"{SP_NOTE if name == 'sp' else ''}",
        f"  widths {', '.join(map(str, k.widths))}; tolerance ±{k.tolerance:g} (the lr* "
        f"drift per doubling of width that passes)",
        f"  coordinate stage: {len(c.configs)} runs ({len(k.widths)} widths x "
        f"{len(k.coord.seeds)} seeds) x {_count(k.coord.steps, 'step')} at lr {c.lr:g}",
        f"  transfer stage: {_count(len(lrs), 'LR')} ({grid}); {seeds}; the first round runs "
        f"at least {_count(c.least, 'trial')} of {_count(c.steps, 'step')}, about "
        f"{c.typical}, at most {c.most}",
        f"  budget: {', '.join(b for b in budget if b)}",
        *(f"  {note}" for note in c.spec.unused())])


# the transfer stage's sweep fields (CheckSpec.sweep) and the check file's fields they hold
SWEEP_FIELDS = (("axes.width", "check.widths"), ("axes.lr", "check.lr"),
                ("axes.seed", "check.seeds"), ("search.", "check.search."),
                ("search:", "check.search:"))


def _check_fields(message: str, file: str) -> str:
    """A refusal of the transfer stage's sweep, in the check file's own terms."""
    text = re.sub(r"^sweep: ", f"{file}: ", message)
    for ours, theirs in SWEEP_FIELDS:
        text = text.replace(f": {ours}", f": {theirs}", 1)
    for ours, theirs in SWEEP_FIELDS[:3]:  # also inside the message: "check.seeds[2]: 1
        # repeats axes.seed[1]" named a field the check file does not have
        text = re.sub(rf"(?<![\w.]){re.escape(ours)}\b", theirs, text)
    return text.replace("the sweep file", "the check file")


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'s' * (n != 1)}"


def seed_text(seeds: list[int] | None) -> str:
    """Seeds as runs of consecutive values: '0-3', '0, 5, 9-10', '-2..1' (a run that starts
    below zero takes '..', so that '-1-0' is never read as a subtraction)."""
    if not seeds:
        return "-"
    runs: list[list[int]] = []
    for s in sorted(set(seeds)):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(str(r[0]) if len(r) == 1 else
                     f"{r[0]}{'-' if r[0] >= 0 else '..'}{r[-1]}" for r in runs)
