"""`mutransfer train`: the example config trains as it is; a sweep file is named as one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mutransfer.cli import main
from mutransfer.commands.train import load_trial_config

ROOT = Path(__file__).parent.parent


def test_the_example_config_is_a_valid_trial_config():
    cfg = load_trial_config(str(ROOT / "configs" / "train.yaml"), ["train.steps=3"])
    assert (cfg.width, cfg.param.name, cfg.train.steps) == (128, "mup_ssm", 3)


def test_the_example_config_trains(tmp_path, capsys):
    config = str(ROOT / "configs" / "train.yaml")
    assert main(["train", config, "--set", "width=64", "--set", "train.steps=4",
                 "--set", "train.eval_every=2", "--set", "train.batch_size=2",
                 "--set", "train.seq_len=32"]) == 0
    assert "status complete" in capsys.readouterr().out


TINY = ["--set", "width=64", "--set", "train.steps=4", "--set", "train.eval_every=2",
        "--set", "train.batch_size=2", "--set", "train.seq_len=32"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_an_out_file_that_refuses_the_bytes_loses_no_result(tmp_path, monkeypatch, capsys):
    """/dev/full opens for writing and refuses every byte (ENOSPC): the trained result goes
    to a new file in the current folder, named in one line, exit 2 (issue 31)."""
    monkeypatch.chdir(tmp_path)
    config = str(ROOT / "configs" / "train.yaml")
    assert main(["train", config, *TINY, "--out", "/dev/full"]) == 2
    err = capsys.readouterr().err.strip()  # progress lines, then the error
    assert "Traceback" not in err
    err = err.splitlines()[-1]
    assert err.startswith("error: --out /dev/full: cannot write the result (No space left")
    saved = Path(err.rsplit("saved in ", 1)[1])
    assert saved.parent == tmp_path
    assert json.loads(saved.read_text())["status"] == "complete"


def test_a_sweep_file_handed_to_train_says_to_use_sweep(capsys):
    assert main(["train", str(ROOT / "sweeps" / "quickstart.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is a sweep file (it has name, axes, resources)" in err
    assert "mutransfer sweep" in err and "configs/train.yaml" in err
