"""Trials of two releases in one store: which generation the analysis reads.

A trial's id is a hash of its whole resolved config (sweep/identity.py), so a release whose
trial config gains a field gives every cell a new id: a sweep re-run into the same folder by a
newer release trains every cell again beside the old ones. Mixed into one table they would
count each cell twice and draw one lr* from two codes. Two trials are of one generation when
their stored configs have the same fields: the keys of the config's sections (`train.lr`,
`model.d_state`, ...), the level at which a release adds a field. Deeper keys are left out on
purpose: they are free-form mappings (`param.overrides`, `model.options`, `model.roles`) whose
keys vary with the cell's values within one release. A changed default that adds no field is
not seen here (the stored values alone cannot tell it from an edited sweep file). A field
listed in results/later_fields.py is left out of the comparison whatever its value: at the
value that reproduces the earlier code its trials are the earlier generation's (as their ids
are); at another value they are cells the earlier release could not run, so they duplicate
none of its trials (and one sweep whose axis sets the field on some cells only, as
sweeps/depth_rule.yaml's `param` axis does, is one generation).

The analysis reads the generation with the most trials (on a tie, the one with more fields:
releases add fields) and says how many trials it left out.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from mutransfer.results.later_fields import LATER_FIELDS
from mutransfer.results.schema import stored_config

# the depth of the keys compared: the config's sections and their fields
SHAPE_DEPTH = 2


def config_fields(config_json: object) -> frozenset[str] | None:
    """The dotted keys of a stored config down to SHAPE_DEPTH; None when there is none."""
    config = stored_config(config_json)
    if config is None:
        return None
    keys = set()
    for name, value in config.items():
        keys.add(name)
        if isinstance(value, dict) and SHAPE_DEPTH > 1:
            keys.update(f"{name}.{field}" for field in value if (name, field) not in LATER_FIELDS)
    return frozenset(keys)


def one_generation(trials: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The trials of the generation the analysis reads, and a note on those left out (None
    when the store holds one generation). Trials without a stored config are kept."""
    if "config" not in trials or trials.empty:
        return trials, None
    shapes = trials["config"].map(config_fields)
    counts = Counter(s for s in shapes if s is not None)
    if len(counts) < 2:
        return trials, None
    kept = max(counts, key=lambda s: (counts[s], len(s)))
    other = shapes.map(lambda s: s is not None and s != kept)
    others = set(counts) - {kept}
    added = sorted(set().union(*others) - kept)
    missing = sorted(kept - set().union(*others))
    diff = ", ".join([*(f"+{k}" for k in added[:3]), *(f"-{k}" for k in missing[:3])])
    more = len(added) + len(missing) - min(len(added), 3) - min(len(missing), 3)
    diff += f" and {more} more" if more > 0 else ""
    note = (f"{int(other.sum())} of {len(trials)} trials are of another generation (a "
            f"release whose trial config has other fields: {diff}) and are left out of every "
            f"table; this analysis reads the {counts[kept]} trials of the largest generation. "
            f"Run each release's sweep into its own results folder")
    return trials[~other], note
