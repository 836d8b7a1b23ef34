"""Trial config fields that say where or how a trial runs, not what it computes.

A trial's id hashes its resolved config (sweep/plan/identity.py). A field listed here is set
to one fixed value before hashing (or left out), so two configs that differ only in it are
one trial: a sweep run again with the token cache elsewhere (`data.cache_dir`: a laptop's
default, then the shared folder docs/cluster.md asks for) finds its stored trials instead of
training every cell again beside them. For the same reason the analysis never makes such a
field an axis (analysis/edits.py) and a checkpoint saved under another value of it resumes
(later_fields.same_trial_text).
"""

from __future__ import annotations

from typing import Any

DROPPED = object()  # the field is left out of the id altogether

# (section, field) -> the value its id is computed with. Each value is the one ids were
# computed with before the field was listed, so no stored trial's id changes at it: a
# cache_dir left at its default was hashed as null; `train.branch` was never hashed
RUN_SETTINGS: dict[tuple[str, str], Any] = {
    # where downloads and the token cache live: the tokens are the same wherever they are
    # (data/cache.py keys a cache by what makes its content, not by its folder)
    ("data", "cache_dir"): None,
    # horizon branching: every cell gets the result a separate run gives, bit for bit on CPU
    ("train", "branch"): DROPPED,
}


def without_run_settings(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (a trial config as JSON data) with every run setting at its id's value."""
    out = dict(config)
    for (section, name), value in RUN_SETTINGS.items():
        fields = out.get(section)
        if not isinstance(fields, dict) or name not in fields:
            continue
        fields = {k: v for k, v in fields.items() if k != name}
        if value is not DROPPED:
            fields[name] = value
        out[section] = fields
    return out


def is_run_setting(path: str) -> bool:
    """Whether a dotted config path (`data.cache_dir`) is a run setting."""
    return tuple(path.split(".", 1)) in RUN_SETTINGS
