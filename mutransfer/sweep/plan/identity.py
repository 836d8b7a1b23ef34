"""Stable trial ids: a hash of the fully resolved trial config.

Two cells with the same resolved config are the same trial, however the sweep file spelled
them (key order, defaults written out or not, an axis whose value changes nothing). A changed
default changes every id: results are then re-run, never reused for a config they were not
trained with. A new config field does too, unless it is listed in results/later_fields.py with
the value that reproduces the earlier code: at that value it is left out of the id, so stores
of earlier releases resume with nothing retrained.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mutransfer.results.later_fields import without_later_fields
from mutransfer.results.run_settings import without_run_settings

ID_LENGTH = 16  # hex digits: 64 bits, collisions out of reach for any sweep


# Mappings whose order is part of what they say: `model.roles` gives each parameter the role
# of the first pattern it matches, so {"emb.*": embedding, "*": hidden} and its reverse train
# different models (sorted, they had one id, and the second found the first's results).
ORDERED = (("model", "roles"),)


def canonical_json(config: dict[str, Any]) -> str:
    """Sorted keys (but those of ORDERED mappings, kept in their order), no whitespace:
    equal configs give equal text, and a config whose ORDERED mappings are sorted gives the
    text `json.dumps(sort_keys=True)` gave, so its id is the one earlier releases gave."""
    return json.dumps(_sorted(config, ()), separators=(",", ":"), allow_nan=False)


def _sorted(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        items = value.items() if path in ORDERED else sorted(value.items())
        return {k: _sorted(v, (*path, str(k))) for k, v in items}
    if isinstance(value, list | tuple):
        return [_sorted(v, (*path, "[]")) for v in value]
    return value


def hash_config(config: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:ID_LENGTH]


def _identity(config: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a trial's id hashes: its config without the later fields at their earlier
    values, with the run settings (results/run_settings.py) at their id's values, and
    without the `drop` fields of `train`."""
    config = without_run_settings(without_later_fields(config))
    train = config.get("train")
    if not drop or not isinstance(train, dict):
        return config
    return {**config, "train": {k: v for k, v in train.items() if k not in drop}}


def trial_id(config: Any) -> str:
    """The id of a TrialConfig (or of its `model_dump(mode="json")`)."""
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    return hash_config(_identity(config))


def group_id(config: dict[str, Any]) -> str:
    """The id of a config with its LR left out: one adaptive (Optuna) study per group."""
    return hash_config(_identity(config, ("lr",)))
