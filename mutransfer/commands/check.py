"""`mutransfer check FILE`: does the LR transfer for this model under this parameterization?

Stage 1, the coordinate check across the widths (mutransfer/coord/anymodel.py: activations and
every parameter tensor's init and update sizes, judged by analysis/coordverdict.py and
analysis/updates.py); a robust violation there is final (FAIL, no search). Stage 2, an
equivalence test of the lr* drift against ±check.tolerance, run sequentially: a transfer search
over the widths with the first seed set (a sweep, `search: {kind: transfer}`, stored under
OUT/sweep and resumable), then one more seed set per round while the drift's 95% interval
straddles the bound and check.budget holds another round. Then one verdict
(mutransfer/analysis/checkverdict.py): PASS, FAIL naming the culprit, or INCONCLUSIVE (the
budget ran out) saying how many seeds would decide it. Exit code 0 PASS, 1 FAIL,
3 INCONCLUSIVE; 2 bad input (nothing written). Writes OUT/coord.parquet, params.parquet,
slopes.parquet, verdict.json, report.html (and the sweep's own report under
OUT/sweep/analysis/). A re-run reuses the stored coordinate check (same settings) and the
stored trials.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mutransfer.commands.check_plan import (
    SP_NOTE,
    Budget,
    Checked,
    check_transfer_data,
    checked,
    seed_text,
)
from mutransfer.errors import UserError

EXIT = {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 3}


def add_arguments(p, name: str) -> None:
    from mutransfer.commands.options import positive_int

    p.add_argument("file", help="check file (YAML), e.g. examples/tiny_gpt_check.yaml")
    p.add_argument("--out", default=None, help="output folder (default: the file's storage, "
                                               "else results/check/NAME)")
    p.add_argument("--budget", default=None, metavar="N|Nm",
                   help="replaces check.budget's: trial-steps (e.g. 20000), refused before "
                        "anything runs when one seed set needs more; or minutes from the "
                        "start (e.g. 10m): no seed set starts that is not expected to end "
                        "before, and a running one stops there (stored, resumable)")
    p.add_argument("--coord-only", action="store_true",
                   help="the coordinate check alone (a FAIL is final; else INCONCLUSIVE)")
    p.add_argument("--num-cpus", type=positive_int, default=None,
                   help="CPUs of the local Ray")


def _settings_key(spec, lr: float) -> str:
    return json.dumps({"trial": spec.trial(0), "coord": spec.check.coord.model_dump(),
                       "widths": spec.check.widths, "lr": lr, "measures": "params"},
                      sort_keys=True, default=str)


def run(args) -> int:
    c = checked(args.file, args.out, args.budget, args.coord_only)
    for note in c.spec.unused():
        print(note)
    try:
        _preflight(c)
        return _run(c, args)
    except SystemExit as exc:  # the model's code (its forward, mid-run): never a silent PASS
        raise UserError(f"model.arch {c.spec.model.get('arch')}: the model's code called "
                        f"sys.exit({exc.code!r}) before the check's verdict") from None


def _preflight(c: Checked) -> None:
    """What can be refused before a run once the data is there: the factory (imported and
    probed at the smallest and largest width) and the data of the transfer stage's trials."""
    from mutransfer.data import load_data
    from mutransfer.models.factory import probe

    source = load_data(c.configs[0].data)
    for cfg in (c.configs[0], c.configs[-1]):
        probe(cfg, source.spec)
    if c.plan is not None:
        check_transfer_data(c.plan, c.file)


def _coord_stage(spec, out: Path, configs, lr: float):
    """Measure (or reuse the stored measurement with the same settings), then judge the
    activations' slopes and every parameter tensor's init and update exponents together."""
    import pandas as pd

    from mutransfer.analysis.checkverdict import diverged_at, judge_all
    from mutransfer.analysis.coordverdict import slopes
    from mutransfer.analysis.updates import expected_exponents, update_slopes
    from mutransfer.coord import anymodel
    from mutransfer.data import load_data
    from mutransfer.param.tables import rules_for
    from mutransfer.statusline import StatusLine

    c = spec.check.coord
    key = _settings_key(spec, lr)
    meta = out / "coord.json"
    stored = [out / "coord.parquet", out / "params.parquet", meta]
    if all(f.exists() for f in stored) and json.loads(meta.read_text()).get("key") == key:
        coord = pd.read_parquet(out / "coord.parquet")
        sizes = pd.read_parquet(out / "params.parquet")
        behind = json.loads(meta.read_text())["behind"]
        print(f"coordinate check: reusing {out / 'coord.parquet'}")
    else:
        t0 = time.time()
        status = StatusLine(sys.stderr)
        coord, behind, sizes = anymodel.run(
            configs, load_data(configs[0].data), c.steps, c.batch_size, c.seq_len,
            progress=lambda d, n, what: status.draw(f"coordinate check [{d}/{n}] {what}"))
        status.close()
        out.mkdir(parents=True, exist_ok=True)
        coord.to_parquet(out / "coord.parquet", index=False)
        sizes.to_parquet(out / "params.parquet", index=False)
        meta.write_text(json.dumps({"key": key, "behind": behind}))
        print(f"coordinate check: {len(configs)} runs x {c.steps} steps, lr {lr:g}, "
              f"{time.time() - t0:.0f} s")
    cfg = configs[0]
    roles = dict(zip(sizes["param"], sizes["role"]))
    expected = expected_exponents(roles, rules_for(cfg.param), cfg.train.optimizer)
    judged = judge_all(slopes(coord.drop(columns="order")),
                       update_slopes(sizes, expected, c.tolerance), c.tolerance, c.alpha)
    judged.to_parquet(out / "slopes.parquet", index=False)
    order = sizes.groupby("param")["order"].min().to_dict()
    return coord, judged, behind, order, diverged_at(coord, sizes)


def _transfer_round(spec, out: Path, seeds: list[int], deadline: float | None,
                    num_cpus: int | None):
    """Run (or resume) the transfer search with `seeds`; the drift row of its one family
    (None when it did not finish), whether the deadline (time.time()) stopped it, and the
    round's stored trials and trial-seconds (`_stored_trials`)."""
    import _thread

    from mutransfer.analysis import analyze, make_plots
    from mutransfer.sweep.run import driver

    spec = _with_seeds(spec, seeds)
    storage = str(out / "sweep")
    timer = None
    if deadline is not None:
        left = deadline - time.time()
        if left <= 0:
            return None, True, _stored_trials(_round_tables(spec, storage))
        timer = threading.Timer(left, _thread.interrupt_main)
        timer.daemon = True
        timer.start()
    stopped = False
    try:
        try:
            result = driver.run(spec.sweep(), storage=storage, num_cpus=num_cpus,
                                out=sys.stdout)
            stopped = result.interrupted
        finally:  # inside the except: a deadline firing as the timer is cancelled is a stop
            if timer is not None:
                timer.cancel()
    except KeyboardInterrupt:
        stopped = True
    tables = _round_tables(spec, storage)  # once a round: it builds the grid's plan
    if stopped:
        return None, True, _stored_trials(tables)
    a = analyze(storage, tables=tables)
    try:
        make_plots(storage, analysis=a)
    except Exception as exc:  # the verdict must not depend on the figures
        print(f"plots failed ({type(exc).__name__}: {exc})")
    rows = a.drift.to_dict("records")
    return (rows[0] if rows else None), False, _stored_trials(tables)


def _with_seeds(spec, seeds: list[int]):
    return spec.model_copy(update={"check": spec.check.model_copy(update={"seeds": seeds})})


def _cell_ids(spec, storage: str) -> set[str]:
    """The trial ids of the transfer stage's grid as `spec` (its check.seeds) runs it."""
    from mutransfer.sweep.run.driver import prepare

    return {cell.trial_id for cell in prepare(spec.sweep(), storage, check_data=False).cells}


def _round_tables(spec, storage: str):
    """The store's tables cut to this round's cells: its widths, LRs and seeds under this
    file's trial config. OUT/sweep also holds what it held before (the seeds of a later
    round of an earlier run, the widths, LRs or steps of an earlier version of the file),
    which the round's drift must not read (before: a re-run's round 1 gave the drift of every
    stored seed, width and config, reported as of check.seeds and check.widths)."""
    from mutransfer.results.store import Store, Tables

    tables = Store(storage).tables()  # empty tables where no round stored a trial yet
    if tables.trials.empty:
        return tables
    ids = _cell_ids(spec, storage)
    return Tables(tables.trials[tables.trials["trial_id"].isin(ids)],
                  tables.steps[tables.steps["trial_id"].isin(ids)], tables.duplicates)


@dataclass
class Rounds:
    """What the sequential transfer stage did: the last finished round's drift and seeds,
    the trials and trial-seconds stored, and why it stopped."""

    drift: dict | None = None
    seeds: list[int] | None = None
    rounds: int = 0
    trials: int = 0
    trial_seconds: float = 0.0
    stopped: str = ""  # "" (decided, or every round ran), else what ran out


def _stored_trials(tables) -> tuple[int, float]:
    """The number of trials of a round's tables (`_round_tables`: its own cells, not those
    of another version of the file the store also holds), and their trial-seconds."""
    return len(tables.trials), float(tables.trials["wall_time_s"].sum())


def _transfer_stage(spec, out: Path, steps: int, budget: Budget, num_cpus: int | None,
                    started: float, coord_steps: int) -> Rounds:
    """The equivalence test, sequentially: each round adds a seed set and resumes the
    search; it stops as soon as the drift's interval decides (inside or outside ±tolerance),
    or before a round the budget is not expected to hold (its cost: the last round's, of
    trials of `steps` steps), or when more seeds cannot decide it (`_more_seeds_may_decide`)."""
    c = spec.check
    minutes = budget.minutes if budget.minutes is not None else c.budget.minutes
    max_steps = budget.steps if budget.steps is not None else c.budget.trial_steps
    deadline = started + minutes * 60 if minutes is not None else None
    r = Rounds()
    last_s, last_trials = 0.0, 0
    for seeds in c.seed_rounds():
        if r.rounds:
            if deadline is not None and time.time() + last_s > deadline:
                r.stopped = f"{minutes:g} min"
                break
            if max_steps is not None and \
                    coord_steps + (r.trials + last_trials) * steps > max_steps:
                r.stopped = f"{max_steps:,} trial-steps"
                break
        print(f"transfer search, round {r.rounds + 1}: seeds {seeds}, widths {c.widths} "
              f"(tolerance ±{c.tolerance:g})", flush=True)
        t0, before = time.time(), r.trials
        drift, stopped, (r.trials, r.trial_seconds) = _transfer_round(spec, out, seeds,
                                                                      deadline, num_cpus)
        if stopped:
            r.stopped = f"{minutes:g} min" if minutes is not None else "interrupted"
            break
        r.drift, r.seeds, r.rounds = drift, seeds, r.rounds + 1
        last_s, last_trials = time.time() - t0, r.trials - before
        lo, hi = (float((drift or {}).get(k, math.nan)) for k in ("ci_low", "ci_high"))
        slope = float((drift or {}).get("slope", math.nan))
        print(f"round {r.rounds}: drift {slope:+.3f} per doubling, 95% interval "
              f"[{lo:+.3f}, {hi:+.3f}] ({r.trials} trials, {r.trial_seconds:.0f} "
              f"trial-seconds, {last_s:.0f} s)", flush=True)
        if not _more_seeds_may_decide(drift, c.tolerance, len(c.widths)):
            break  # decided; or no interval, which more seeds of this grid do not give
    else:
        r.stopped = f"{c.budget.seeds} seeds"
    return r


def _more_seeds_may_decide(drift: dict | None, tolerance: float, widths: int) -> bool:
    """Whether another seed set may decide the drift: an interval across the bound narrows
    with seeds; without an interval, seeds give one only where each of the `widths` has its
    optimum inside the grid (a finite slope, none on the grid's edge) and lacks only the
    seeds' spread, as the verdict then advises (checkverdict.decide: "more seeds
    (check.seeds) give each lr* an interval")."""
    from mutransfer.analysis.checkverdict import equivalence

    d = drift or {}
    lo, hi, slope = (float(d.get(k, math.nan)) for k in ("ci_low", "ci_high", "slope"))
    if math.isfinite(lo) and math.isfinite(hi):
        return not equivalence(lo, hi, tolerance)
    return (math.isfinite(slope) and not int(d.get("n_edge", 0) or 0)
            and int(d.get("n_widths", widths) or 0) >= widths)


def _run(job: Checked, args) -> int:
    from mutransfer.analysis.checkverdict import decide, diverged_verdict

    spec, out, configs = job.spec, job.out, job.configs
    t0 = time.time()
    coord, judged, behind, order, diverged = _coord_stage(spec, out, configs, job.lr)
    c = spec.check
    r = Rounds()
    transfer = job.plan is not None  # not --coord-only
    if transfer and diverged is None and not (judged["status"] == "robust").any():
        r = _transfer_stage(spec, out, job.steps, job.budget, args.num_cpus, t0,
                            len(configs) * c.coord.steps)
    elif transfer:
        print("transfer search: skipped, the coordinate stage "
              + ("already FAILs" if diverged is None else f"diverged at width {diverged}"))
    n_seeds = len(r.seeds or c.seeds)
    if diverged is not None:  # its slopes are no evidence either way
        v = diverged_verdict(judged, diverged, job.lr)
    else:
        v = decide(judged, coord, behind, r.drift, c.tolerance, seeds=n_seeds,
                   steps=int(spec.train.get("steps", 200)), widths=len(c.widths),
                   param_order=order, coord_tolerance=c.coord.tolerance)
    if v.verdict == "INCONCLUSIVE" and r.stopped and r.drift is None:
        v.reason = v.reason.replace("did not run", "did not finish")
        v.advice = [f"the budget ({r.stopped}) stopped the transfer search; its trials are "
                    f"stored: run again to resume, or raise check.budget"]
    elif v.verdict == "INCONCLUSIVE" and r.stopped:
        v.reason += f" ({r.stopped}; {r.rounds} round{'s' * (r.rounds > 1)}, seeds "\
                    f"{seed_text(r.seeds)})"
    if v.verdict == "FAIL" and configs[0].param.name == "sp":
        v.advice.append("param.name is sp" + SP_NOTE)
    elapsed = time.time() - t0
    print(v.text())
    _write(out, spec, v, judged, elapsed, r)
    print(f"wrote {out / 'verdict.json'}, {out / 'report.html'} ({elapsed:.0f} s; "
          f"{r.trials} trials, {r.trial_seconds:.0f} trial-seconds)")
    return EXIT[v.verdict]


def _write(out: Path, spec, v, judged, elapsed: float, r: Rounds) -> None:
    from mutransfer.commands.check_report import write_report

    out.mkdir(parents=True, exist_ok=True)
    record = {"name": spec.name, "verdict": v.verdict, "reason": v.reason,
              "advice": v.advice, "named_role": v.named_role,
              "culprit": v.culprit.label if v.culprit else None,
              "culprit_params": v.culprit.params if v.culprit else {},
              "culprit_kind": v.culprit.kind if v.culprit else None,
              "culprit_slope": _num(v.culprit.slope) if v.culprit else None,
              "culprit_expected": _num(v.culprit.expected) if v.culprit else None,
              "drift": _num(v.drift), "drift_low": _num(v.drift_low),
              "drift_high": _num(v.drift_high),
              "drift_se_seeds": _num(float((r.drift or {}).get("se_seeds", math.nan))),
              "drift_se_placement": _num(float((r.drift or {}).get("se_placement", math.nan))),
              "drift_df": int((r.drift or {}).get("ci_df", 0) or 0), "robust": v.robust,
              "borderline": v.borderline, "checked": v.checked, "seconds": round(elapsed, 1),
              "tolerance": spec.check.tolerance, "seeds": r.seeds, "rounds": r.rounds,
              "trials": r.trials, "trial_seconds": round(r.trial_seconds, 1),
              "stopped_by": r.stopped or None}
    (out / "verdict.json").write_text(json.dumps(record, indent=2))
    write_report(out, spec, v, judged)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None
