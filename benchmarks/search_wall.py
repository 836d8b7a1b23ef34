"""Wall-clock time of the transfer search against its grid, on N workers, replayed.

The trial-seconds a search saves (benchmarks/search_targets.py) are GPU-hours; the wall clock
is another matter: the search walks each family's widths upward and a width's next LRs wait
for its earlier ones, so it keeps fewer workers busy than a grid does. This plays both on a
finished grid store with N workers: each trial takes its width's median stored wall time
(every trial of a width does the same work), a free worker takes the next trial the strategy
offers (the grid's cells in its own order; the search's `next_trial`), and a worker with
nothing to take waits for the next trial to end.

    python benchmarks/search_wall.py STORE[:SWEEP.yaml][@SEEDS] ... [--workers 2 4 8 16]

Prints per store and N: the grid's and the search's makespan (seconds), their ratio, and the
search's mean busy workers.
"""

from __future__ import annotations

import heapq
import sys
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).parent))  # search_replay beside it

from search_replay import cell_key, grid_tables, store_parser, store_spec  # noqa: E402

from mutransfer.configbase import validate  # noqa: E402
from mutransfer.results.store import StoreState  # noqa: E402
from mutransfer.sweep.plan.cells import build_plan  # noqa: E402
from mutransfer.sweep.plan.spec import SweepSpec  # noqa: E402
from mutransfer.sweep.search.transfer.decisions import Outcome  # noqa: E402
from mutransfer.sweep.search.transfer.strategy import TransferStrategy, search_of  # noqa: E402


def makespan(next_id, finish, duration, workers: int) -> tuple[float, float]:
    """(the time the last trial ends, the mean number of workers busy until then) when
    `workers` take trials from `next_id()` (None: nothing to take now) and report each to
    `finish(trial_id)` as it ends after `duration(trial_id)` seconds."""
    now, busy, running = 0.0, 0.0, []  # running: a heap of (end, order, trial id)
    order = 0
    while True:
        while len(running) < workers and (tid := next_id()) is not None:
            heapq.heappush(running, (now + duration(tid), order, tid))
            busy += duration(tid)
            order += 1
        if not running:
            return now, busy / now if now else 0.0
        now, _, tid = heapq.heappop(running)
        finish(tid)


def play(store: Path, doc: dict | None, seeds: list[int] | None, workers: int
         ) -> tuple[float, float, float, float]:
    """(grid makespan, its mean busy, search makespan, its mean busy) on `workers`."""
    tables = grid_tables(store, seeds, doc)
    if doc is None:
        doc = yaml.safe_load((store / "sweep.yaml").read_text())
    doc = {k: v for k, v in doc.items() if k not in ("search", "storage")}
    if seeds is not None:
        doc["axes"] = {**doc["axes"], "seed": list(seeds)}
    trials = tables.trials[tables.trials["status"].isin(("complete", "diverged"))]
    rows = {cell_key(r): r for r in trials.to_dict("records")}
    median = trials.groupby("width")["wall_time_s"].median().to_dict()

    def plan_of(kind: str):
        return build_plan(validate(SweepSpec, {**doc, "search": {"kind": kind}}))

    grid = [c for c in plan_of("grid").cells if cell_key(c.columns) in rows]
    queue = iter([c.trial_id for c in grid])
    width_of = {c.trial_id: c.width for c in grid}
    g_span, g_busy = makespan(lambda: next(queue, None), lambda tid: None,
                              lambda tid: median[width_of[tid]], workers)

    plan = plan_of("transfer")
    search = search_of(TransferStrategy().plan_work(plan, StoreState()))
    cells = {c.trial_id: c for c in plan.cells}

    def finish(tid: str) -> None:
        row = rows.get(cell_key(cells[tid].columns))
        if row is None:
            search.fail(tid)
        else:
            search.finish(tid, Outcome.of_row(row))

    s_span, s_busy = makespan(search.next_trial, finish,
                              lambda tid: median[cells[tid].width], workers)
    return g_span, g_busy, s_span, s_busy


def main() -> None:
    ap = store_parser(__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8, 16])
    args = ap.parse_args()
    out = []
    for spec in args.stores:
        store, doc, seeds = store_spec(spec)
        for n in args.workers:
            g, gb, s, sb = play(store, doc, seeds, n)
            out.append({"store": store.name, "workers": n, "grid s": round(g, 1),
                        "search s": round(s, 1), "search / grid": round(s / g, 3),
                        "busy (grid)": round(gb, 2), "busy (search)": round(sb, 2)})
    print(pd.DataFrame(out).to_string(index=False))


if __name__ == "__main__":
    main()
