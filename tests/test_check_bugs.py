"""`mutransfer check --coord-only` on planted bugs (benchmarks/check_bugs.py's factories): the
tiny GPT without its readout multiplier FAILs naming the readout, with its embedding at
1/√width FAILs naming the embedding, with one tensor's Adam LR off by 1/m FAILs naming that
tensor, and the correct one does not FAIL."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main

REPO = Path(__file__).resolve().parents[1]


def _check(tmp_path: Path, bug: str) -> dict:
    sys.path.insert(0, str(REPO))
    from benchmarks.check_bugs import check_spec

    # 4 widths, 4 seeds: the t test needs the power-law fit to have 2 df, the seeds 3
    spec = check_spec("gpt", bug, [0, 1, 2, 3], [16, 32, 64, 128])
    spec["model"]["options"].update(n_layer=1, max_len=16)
    spec["check"]["coord"].update(steps=2, seq_len=16)
    path = tmp_path / f"{bug or 'correct'}.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / (bug or "correct")
    code = main(["check", str(path), "--out", str(out), "--coord-only"])
    v = json.loads((out / "verdict.json").read_text())
    assert code == {"FAIL": 1, "INCONCLUSIVE": 3}[v["verdict"]]
    return v


@pytest.mark.slow
@pytest.mark.parametrize("bug,role,tensor", [
    ("readout_no_mult", "readout", None), ("embedding_init", "embedding", None),
    ("lr_head_down", "readout", "head.weight"), ("", "", None)])
def test_planted_gpt_bugs_are_named(tmp_path, monkeypatch, bug, role, tensor):
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    v = _check(tmp_path, bug)
    if tensor:  # the tensor's own update: its relative update as 1/m, expected m^0
        assert list(v["culprit_params"]) == [tensor], v
        assert v["culprit_slope"] == pytest.approx(-1.0, abs=0.1)
        assert v["culprit_expected"] == 0.0
    if bug:
        assert v["verdict"] == "FAIL" and v["named_role"] == role, v
    else:
        assert v["verdict"] == "INCONCLUSIVE", v  # coordinates pass; no drift without a search
    assert (tmp_path / (bug or "correct") / "report.html").exists()
