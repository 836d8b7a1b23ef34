"""Adaptive search with Optuna: per group (every axis but the LR), `trials_per_width` trials at
LRs Optuna's TPE sampler proposes in the group's LR range (Tune's side: studies.py).

Named optuna_search so that `import optuna` inside it is the Optuna package."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mutransfer.sweep.grid import Cell, Group, Plan
from mutransfer.sweep.search.base import Oracle, SearchStrategy, TuneSetup, Work

if TYPE_CHECKING:
    from mutransfer.results.store import StoreState
    from mutransfer.sweep.progress import Progress


class OptunaStrategy(SearchStrategy):
    kind = "optuna"
    adaptive = True

    def bounds(self, plan: Plan) -> tuple[int, int]:
        return plan.n_trials, plan.n_trials

    def plan_work(self, plan: Plan, state: StoreState) -> Work:
        """Each group's budget less the trials of this kind the store holds for it; the
        stored trials within its LR range warm-start its study."""
        from mutransfer.sweep.identity import group_id

        done: dict[str, list[dict[str, Any]]] = {}
        for row in state.complete.values():
            done.setdefault(_group_of(row, group_id), []).append(row)
        work = Work()
        for g in plan.groups:
            rows = done.get(g.group_id, [])
            ran = sum(1 for r in rows if r.get("search") == self.kind)
            if ran < g.budget:
                work.groups.append(g)
                work.budgets[g.group_id] = g.budget - ran
                work.warm[g.group_id] = _warm_points(rows, g)
        return work

    def offline(self, plan: Plan, work: Work, oracle: Oracle) -> list[dict[str, Any]]:
        """Each group's study asked and told in turn (Optuna's ask/tell, the same sampler)."""
        import optuna

        from mutransfer.sweep.trainable import objective

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        rows = []
        for g in work.groups:
            study = optuna.create_study(sampler=sampler_for(plan.spec.search.seed, g, work))
            for lr, obj in work.warm.get(g.group_id, []):
                study.add_trial(optuna.trial.create_trial(
                    params={"lr": lr}, distributions=space_of(g), value=obj))
            for _ in range(work.budgets[g.group_id]):
                trial = study.ask(space_of(g))
                row = oracle(at_lr(g, float(trial.params["lr"])))
                study.tell(trial, objective(row))
                rows.append(row)
        return rows

    def tune_setup(self, plan: Plan, work: Work, progress: Progress | None) -> TuneSetup:
        from mutransfer.sweep.studies import make_searcher

        return TuneSetup(search_alg=make_searcher(work, plan.spec.search),
                         num_samples=work.n_trials)

    def summary(self, plan: Plan, work: Work) -> str:
        return (f"{len(plan.groups)} groups x {plan.spec.search.trials_per_width} "
                f"{self.kind} trials = {plan.n_trials} trials")

    def listing(self, plan: Plan, work: Work, state: StoreState) -> str:
        from mutransfer.sweep.listing import group_listing

        return group_listing(plan, work)


def space_of(g: Group) -> dict[str, Any]:
    import optuna

    return {"lr": optuna.distributions.FloatDistribution(2.0 ** g.log2_lo, 2.0 ** g.log2_hi,
                                                         log=True)}


def sampler_for(seed: int, g: Group, work: Work) -> Any:
    """The group's TPE sampler: seeded by the sweep's seed and the group's id."""
    import optuna

    budget = work.budgets[g.group_id]
    warm = work.warm.get(g.group_id, [])
    return optuna.samplers.TPESampler(seed=seed + int(g.group_id[:8], 16),
                                      n_startup_trials=max(3, (budget + len(warm)) // 4))


def at_lr(g: Group, lr: float) -> Cell:
    """The trial of group `g` at `lr`, as a cell (its id follows from its config)."""
    from mutransfer.sweep.identity import trial_id

    config = json.loads(json.dumps(g.config))
    config["train"]["lr"] = lr
    return Cell(trial_id(config), config, {**g.columns, "lr": lr})


def _group_of(row: dict[str, Any], group_id) -> str:
    try:
        return group_id(json.loads(row["config"]))
    except (TypeError, ValueError, KeyError):
        return ""


def _warm_points(rows: list[dict[str, Any]], g: Group) -> list[tuple[float, float]]:
    """Stored trials of a group within its LR range: the study starts from what is known."""
    from mutransfer.sweep.trainable import objective

    lo, hi = 2.0 ** g.log2_lo, 2.0 ** g.log2_hi
    return [(float(r["lr"]), objective(r)) for r in rows if lo <= float(r["lr"]) <= hi]
