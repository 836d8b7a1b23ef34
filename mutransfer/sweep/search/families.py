"""The families of a grid: one parameterization and one value of every other axis but width,
LR and seed; its cells form a width x LR x seed grid. Shared by the transfer search (which
walks a family's widths) and the early-stopping rule (which compares a cell with its family)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mutransfer.analysis.groups import compact_json_values  # downward: the tables' labels
from mutransfer.sweep.plan.cells import Cell

NOT_FAMILY = ("width", "lr", "seed")  # trials-table columns that do not split families


@dataclass
class Family:
    """One family's grid: ascending widths and LRs, its seeds, and the cell ids."""

    key: tuple[tuple[str, str], ...]  # (column, value as JSON) of the family's axes
    widths: list[int]
    lrs: list[float]
    seeds: list[Any]
    ids: dict[tuple[int, int, Any], str] = field(default_factory=dict)  # (w, lr index, seed)
    label: str = ""  # `sp`, or `sp, optimizer=sgd` where other axes vary between families

    @property
    def log2_lrs(self) -> np.ndarray:
        return np.log2(np.asarray(self.lrs, dtype=float))

    def cell_ids(self, width: int, lr_index: int) -> list[str]:
        return [self.ids[k] for s in self.seeds if (k := (width, lr_index, s)) in self.ids]


def families_of(cells: Iterable[Cell]) -> list[Family]:
    """Split grid cells into families by their columns (all but width, LR and seed)."""
    by_key: dict[tuple, list[Cell]] = {}
    for cell in cells:
        key = tuple((k, json.dumps(v, sort_keys=True)) for k, v in cell.columns.items()
                    if k not in NOT_FAMILY)
        by_key.setdefault(key, []).append(cell)
    families = []
    for key, members in by_key.items():
        lrs = sorted({float(c.columns["lr"]) for c in members})
        fam = Family(key, sorted({c.width for c in members}), lrs,
                     sorted({c.columns["seed"] for c in members}, key=str))
        index = {lr: i for i, lr in enumerate(lrs)}
        for c in members:
            fam.ids[(c.width, index[float(c.columns["lr"])], c.columns["seed"])] = c.trial_id
        families.append(fam)
    varying = {k for k, _ in {kv for f in families for kv in f.key}} if len(families) > 1 \
        else set()
    varying = {k for k in varying if len({dict(f.key).get(k) for f in families}) > 1}
    # a `param` axis of whole entries: only the entries that differ, as the analysis labels it
    texts = {k: compact_json_values(k, sorted({dict(f.key).get(k) for f in families} - {None}))
             for k in varying if k != "parameterization"}
    for fam in families:
        values = dict(fam.key)
        parts = [json.loads(values.get("parameterization", '"?"'))]
        parts += [texts[k][v] for k, v in fam.key if k in texts]
        fam.label = ", ".join(str(p) for p in parts)
    return families
