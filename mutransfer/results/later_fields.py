"""Config fields added after stores were written, and the value each had in effect before.

A trial's id hashes its whole resolved config (sweep/plan/identity.py), so a new field would
give every cell a new id and a store of the earlier release would be trained again from
scratch. A field listed here, at the value that reproduces what the code did before it existed,
is left out of the id and of the store's generation (analysis/generations.py): an earlier
store resumes with nothing retrained, and its trials are read with the new ones. Set to any
other value, the field changes the id as every field does.

Add a field here when it is added to the trial config, with the value under which the trial
is the one the earlier release ran (tests/test_identity_later_fields.py checks that every
listed field exists and that a default config's id leaves them out).
"""

from __future__ import annotations

import json
from typing import Any

from mutransfer.results.run_settings import without_run_settings

# (section, field) -> the value that leaves the trial as the release before the field ran it
LATER_FIELDS: dict[tuple[str, str], Any] = {
    # depth as numbers (issue 30.4): None = the `param.depth` preset's α; {} = its exponents
    ("param", "depth_alpha"): None,
    ("param", "depth_exponents"): {},
    # Mamba-2's options (issue 30): inert unless model.arch is mamba2; these are its defaults,
    # so a mamba2 trial at its defaults has the same id whichever release wrote it
    ("model", "mamba2"): {"A_init_max": 16.0, "A_init_min": 1.0, "chunk_size": 64,
                          "headdim": 64, "ngroups": 1, "widen": "heads"},
}


def without_later_fields(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (a trial config as JSON data) without the later fields at their earlier value."""
    out = dict(config)
    for (section, field), earlier in LATER_FIELDS.items():
        values = out.get(section)
        if isinstance(values, dict) and field in values and values[field] == earlier:
            out[section] = {k: v for k, v in values.items() if k != field}
    return out


def same_trial_text(saved: Any, current: str) -> bool:
    """Whether a config text saved with a trial's state (a checkpoint's) is the trial config
    `current` (JSON text): equal, or equal once the later fields at their earlier values are
    left out of both, as the trial id leaves them out. A checkpoint written by a release
    before such a field existed lacks it, yet is the same trial: comparing the texts alone
    restarted every interrupted trial from step 0 after an upgrade. The run settings
    (run_settings.py: the token cache's folder) are compared as the id compares them."""
    if saved == current:
        return True  # the common case, without parsing
    if not isinstance(saved, str):
        return False
    try:
        a, b = json.loads(saved), json.loads(current)
    except ValueError:
        return False
    return isinstance(a, dict) and isinstance(b, dict) and \
        without_run_settings(without_later_fields(a)) == \
        without_run_settings(without_later_fields(b))
