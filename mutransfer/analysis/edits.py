"""Trials of one cell that are not replicates: a sweep file edited between runs into one store.

A cell is a parameterization, a value of every axis column, a width and an LR; its seeds are
replicates. The trials table holds only the swept axes as columns, so a sweep file whose fixed
settings were edited and run again into the same folder (`train.steps: 60` -> `100`: every
trial id changes, every cell runs again beside the old one) gives each cell two trials per
seed that the table cannot tell apart: averaged as replicates, they mixed two trainings into
one loss, with nothing said. Their stored configs (the `config` column) tell them apart: each
config field that differs between the trials of one cell and seed becomes an axis column, so
each version of the sweep is its own family (and `train.steps` & co. feed the `tokens` scale
axis as a swept one does), with a note naming the fields.
"""

from __future__ import annotations

import json

import pandas as pd

from mutransfer.analysis.groups import flat_paths
from mutransfer.results.run_settings import is_run_setting
from mutransfer.results.schema import stored_config
from mutransfer.results.store import TRIAL_COLUMNS

CELL = ("parameterization", "optimizer", "width", "lr", "seed")


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _leaf(value: object) -> object:
    """A config value as an axis column holds it: numbers and text as they are, lists and
    mappings as JSON text (as a sweep writes an extra axis)."""
    return _text(value) if isinstance(value, (list, dict)) else value


def config_axes(trials: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """`trials` with a column per config field that differs among the trials of one cell
    and seed (None where a trial has no stored config), and a note naming those fields; the
    trials unchanged with a note when such trials' configs do not differ (before: averaged
    without a word), and with None when every cell and seed holds one trial."""
    if "config" not in trials or len(trials) < 2:
        return trials, None
    key = [c for c in CELL if c in trials]
    key += [c for c in trials.columns if c not in TRIAL_COLUMNS and not c.startswith("_")]
    texts = trials[key].apply(lambda col: col.map(_text))
    twice = texts.duplicated(keep=False)
    if not twice.any():
        return trials, None
    flats = trials["config"].map(lambda t: flat_paths(stored_config(t) or {}))
    differ: set[str] = set()
    for _, rows in texts[twice].groupby(list(texts.columns), sort=False):
        cell = [flats.loc[i] for i in rows.index if flats.loc[i]]
        paths = set().union(*cell) if cell else set()
        differ |= {p for p in paths if len({_text(f.get(p)) for f in cell}) > 1
                   and p not in trials and not is_run_setting(p)}
    n_cells = int(texts[twice].drop(columns=["seed"], errors="ignore").drop_duplicates().shape[0])
    if not differ:  # nothing tells them apart: said, and averaged as the seed's replicates
        same = ("with the same config" if flats[twice].map(bool).any()
                else "with no stored config to tell them apart")
        return trials, (f"{n_cells} cells hold more than one trial of a seed {same} under "
                        "different trial ids (rows copied in from another store, or written "
                        "by another version?): averaged as that seed's replicates")
    fields = sorted(differ)
    out = trials.copy()
    for path in fields:
        out[path] = [_leaf(f.get(path)) if f else None for f in flats]
    shown = ", ".join(fields[:4]) + (f" and {len(fields) - 4} more" if len(fields) > 4 else "")
    note = (f"{n_cells} cells hold more than one trial of a seed, whose stored configs differ "
            f"in {shown} (the sweep file edited between runs into this folder?): not "
            f"replicates, so each value is its own family here (an axis column)")
    return out, note
