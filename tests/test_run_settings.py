"""Where the token cache lives says where a trial reads its tokens, not what it computes
(mutransfer/results/run_settings.py): a sweep run again with `data.cache_dir` moved (a
laptop's default, then the shared folder docs/cluster.md asks for) finds the trials it
stored instead of training every cell again, and the analysis reads them as one family."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mutransfer.analysis.edits import config_axes
from mutransfer.config import TrialConfig
from mutransfer.results.later_fields import same_trial_text, without_later_fields
from mutransfer.results.store import Store
from mutransfer.sweep.plan.cells import build_plan
from mutransfer.sweep.plan.horizon import family_id
from mutransfer.sweep.plan.identity import hash_config, trial_id
from mutransfer.sweep.plan.spec import SweepSpec
from mutransfer.sweep.run.trainable import TrialUnit, run_unit
from tests.sweeps import tiny_sweep


def plan_with_cache(root: Path, cache_dir: str | None):
    doc = tiny_sweep("moved", {"lr": [1e-3, 1e-2]}, steps=4, eval_every=2, storage=str(root))
    doc["data"] = {"source": "stdlib", "cache_dir": cache_dir}
    return build_plan(SweepSpec.model_validate(doc))


def test_a_sweep_run_again_with_its_token_cache_moved_has_nothing_to_run(tmp_path):
    root = tmp_path / "results"
    first = plan_with_cache(root, str(tmp_path / "laptop-cache"))
    for c in first.cells:
        run_unit(TrialUnit(c.config, c.columns, c.trial_id, "grid", None), str(root), "moved")
    moved = plan_with_cache(root, str(tmp_path / "shared-cache"))
    done = Store(root).scan(repair=False).complete
    assert [c.trial_id for c in moved.cells if c.trial_id not in done] == []


def test_a_cache_left_at_its_default_keeps_the_id_it_had_before_the_rule():
    dumped = TrialConfig.model_validate({"width": 64, "train": {"lr": 0.01}}).model_dump(
        mode="json")
    assert dumped["data"]["cache_dir"] is None
    before = without_later_fields(dumped)  # the id's text before run settings existed
    before["train"] = {k: v for k, v in before["train"].items() if k != "branch"}
    assert trial_id(dumped) == hash_config(before)


def test_a_horizon_family_does_not_change_with_the_cache(tmp_path):
    a, b = (plan_with_cache(tmp_path, str(tmp_path / d)).cells[0].config for d in "ab")
    assert family_id(a) == family_id(b)


def test_a_checkpoint_saved_with_the_cache_elsewhere_is_the_same_trial(tmp_path):
    a, b = (json.dumps(plan_with_cache(tmp_path, str(tmp_path / d)).cells[0].config)
            for d in "ab")
    assert same_trial_text(a, b)


def test_trials_stored_under_two_cache_folders_are_not_split_into_two_families(tmp_path):
    """Stores written before the rule hold a cell twice, once per cache folder: read as the
    seed's replicates with a note, never as an axis `data.cache_dir`."""
    rows = []
    for d in "ab":
        cell = plan_with_cache(tmp_path, str(tmp_path / d)).cells[0]
        rows.append({"trial_id": d, "parameterization": "mup_ssm", "width": 16,
                     "lr": cell.config["train"]["lr"], "seed": 0,
                     "config": json.dumps(cell.config)})
    out, note = config_axes(pd.DataFrame(rows))
    assert "data.cache_dir" not in out.columns
    assert "with the same config" in note
