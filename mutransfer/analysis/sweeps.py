"""Trials of several sweep files in one results folder: which sweeps, and whether they agree.

A results folder takes any sweep run into it, so two sweep files (a grid, then a few more LRs
from another file; or by mistake two different experiments) can share one store. Their trials
are analysed as one sweep's, which is right only when every setting outside the swept axes
agrees: a different step count, batch or model puts two curves into one lr* fit. The trials'
stored configs tell: a setting held at one value within each sweep but at different values
across sweeps is named in the note, as the place where the mixture is wrong.
"""

from __future__ import annotations

import json

import pandas as pd

from mutransfer.analysis.groups import flat_paths
from mutransfer.results.schema import stored_config

# Config paths the analysis reads as its own columns (width, lr, seed, parameterization,
# optimizer): they may differ between the sweeps of one folder, as cells of one grid do.
AXIS_PATHS = frozenset({"width", "train.lr", "train.seed", "param.name", "train.optimizer"})
SHOWN = 3  # differing settings named in the note


def differing_settings(trials: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """(path, the values per sweep) of each config setting that is one value within every
    sweep of `trials` but not the same value in all of them; swept axes (the table's columns)
    and the analysis's own columns are left out. Empty without stored configs."""
    if "config" not in trials or "sweep" not in trials:
        return []
    per_sweep: dict[str, dict[str, set[str]]] = {}
    for name, config in zip(trials["sweep"].astype(str), trials["config"]):
        doc = stored_config(config)
        if doc is None:
            continue
        seen = per_sweep.setdefault(name, {})
        for path, value in flat_paths(doc).items():  # compared as JSON text
            seen.setdefault(path, set()).add(json.dumps(value, sort_keys=True, default=str))
    if len(per_sweep) < 2:
        return []
    skip = AXIS_PATHS | set(trials.columns)
    paths = set.intersection(*(set(v) for v in per_sweep.values()))
    out = []
    for path in sorted(paths - skip):
        values = [per_sweep[name][path] for name in per_sweep]
        if all(len(v) == 1 for v in values) and len({next(iter(v)) for v in values}) > 1:
            out.append((path, [next(iter(v)) for v in values]))
    return out


def sweep_names(trials: pd.DataFrame) -> tuple[str, str]:
    """The name of the sweep the trials came from, and a note when they came from several
    (sweep files run into one results folder: their lr* are fitted as one sweep's), naming
    the settings their sweep files disagree on. Several names are joined, the one with the
    most trials first."""
    if "sweep" not in trials:
        return "", ""
    counts = trials["sweep"].dropna().astype(str).value_counts(sort=False)
    counts = counts.sort_values(ascending=False, kind="stable")
    if len(counts) < 2:
        return (str(counts.index[0]) if len(counts) else ""), ""
    listed = ", ".join(f"{name} ({n})" for name, n in counts.items())
    note = (f"the trials come from {len(counts)} sweeps: {listed}; they are analysed as one "
            "sweep")
    differ = differing_settings(trials[trials["sweep"].notna()])
    if differ:
        shown = "; ".join(f"{path} {' vs '.join(values)}" for path, values in differ[:SHOWN])
        more = f" and {len(differ) - SHOWN} more" if len(differ) > SHOWN else ""
        note += (f", though their settings differ outside the swept axes ({shown}{more}): "
                 "their losses are not comparable, so lr* mixes two experiments; run each "
                 "sweep into its own results folder (or make the setting an axis)")
    else:
        note += " (their settings agree outside the swept axes)"
    return " + ".join(counts.index), note
