"""Fields added to the trial config after stores were written keep earlier stores valid: at
the value that reproduces the earlier code they are left out of trial ids and of the store's
generation; at any other value they change the id like every field
(mutransfer/results/later_fields.py)."""

from __future__ import annotations

import json

import pandas as pd

from mutransfer.analysis.generations import one_generation
from mutransfer.config import TrialConfig
from mutransfer.results.later_fields import LATER_FIELDS
from mutransfer.sweep.plan.identity import hash_config, trial_id


def _config(**param) -> TrialConfig:
    return TrialConfig.model_validate({"width": 64, "model": {"arch": "mamba"},
                                       "param": {"name": "mup_ssm", **param},
                                       "train": {"lr": 0.01}})


def _without(config: dict, keys) -> dict:
    return {section: ({k: v for k, v in values.items() if (section, k) not in keys}
                      if isinstance(values, dict) else values)
            for section, values in config.items()}


def test_every_later_field_exists_and_its_earlier_value_is_the_default():
    dumped = _config().model_dump(mode="json")
    for (section, field), earlier in LATER_FIELDS.items():
        assert dumped[section][field] == earlier, (section, field)


def test_a_default_config_has_the_id_it_had_before_the_later_fields_existed():
    dumped = _config().model_dump(mode="json")
    assert trial_id(_config()) == trial_id(_without(dumped, LATER_FIELDS))
    assert trial_id(_config()) != hash_config(dumped)  # the fields are there, and left out


def test_a_later_field_set_to_another_value_changes_the_id():
    base = trial_id(_config(depth="completep"))
    assert trial_id(_config(depth="completep", depth_alpha=0.75)) != base
    assert trial_id(_config(depth="completep",
                            depth_exponents={"hidden": {"lr_adam": 0.375}})) != base


def test_trials_of_the_earlier_release_and_this_one_are_one_generation():
    new = _config().model_dump(mode="json")
    old = _without(new, LATER_FIELDS)
    trials = pd.DataFrame({"config": [json.dumps(old), json.dumps(new)]})
    kept, note = one_generation(trials)
    assert note is None and len(kept) == 2


def test_cells_that_set_a_later_field_and_cells_that_leave_it_are_one_generation():
    """sweeps/depth_rule.yaml's param axis: completep, and completep with depth_exponents set.
    Only the first is stored without the field; the analysis read only it and dropped the
    other cells as "another generation"."""
    configs = [_config(depth="completep"),
               _config(depth="completep", depth_exponents={"hidden": {"lr_adam": 0.375}}),
               _config(depth="completep", depth_alpha=0.75)]
    trials = pd.DataFrame({"config": [json.dumps(c.model_dump(mode="json")) for c in configs]})
    kept, note = one_generation(trials)
    assert note is None and len(kept) == 3
