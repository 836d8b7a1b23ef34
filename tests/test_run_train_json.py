"""`mutransfer train --out FILE` writes standard JSON, which any JSON parser reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mutransfer.cli import main

ROOT = Path(__file__).parent.parent
TINY = ["--set", "width=16", "--set", "model.n_layer=1", "--set", "model.d_state=4",
        "--set", "model.base_width=16", "--set", "train.steps=2", "--set", "train.eval_every=1",
        "--set", "train.batch_size=2", "--set", "train.seq_len=16", "--set",
        "train.eval_batches=1", "--set", "train.warmup=0"]


def _strict_load(text: str):
    """json.loads that refuses NaN and Infinity, as every parser but Python's does."""
    def refuse(word: str):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def test_the_result_file_is_standard_json_with_null_for_step_0s_train_loss(tmp_path, capsys):
    """Step 0 has no train loss (NaN in memory): the file says null, not the bare word NaN
    that JavaScript's JSON.parse and Go refuse."""
    out = tmp_path / "result.json"
    assert main(["train", str(ROOT / "configs" / "train.yaml"), *TINY, "--out", str(out)]) == 0
    result = _strict_load(out.read_text())
    assert result["status"] == "complete"
    assert result["history"][0]["step"] == 0 and result["history"][0]["train_loss"] is None
    assert all(math.isfinite(p["train_loss"]) for p in result["history"][1:])
    assert math.isfinite(result["final_eval_loss"])


def test_non_finite_values_anywhere_in_a_result_become_null():
    """A diverged trial's losses (inf, nan) are null too; finite values are kept exactly."""
    from mutransfer.commands.train import result_json

    result = {"status": "diverged", "last_finite_loss": 5.25, "final_eval_loss": None,
              "history": [{"step": 0, "train_loss": float("nan"), "eval_loss": 5.5},
                          {"step": 1, "train_loss": float("inf"), "eval_loss": -float("inf")}],
              "tags": (1.5, float("nan"))}
    back = _strict_load(result_json(result))
    assert back["history"] == [{"step": 0, "train_loss": None, "eval_loss": 5.5},
                               {"step": 1, "train_loss": None, "eval_loss": None}]
    assert back["last_finite_loss"] == 5.25 and back["tags"] == [1.5, None]
