"""`mutransfer train`: the example config trains as it is; a sweep file is named as one."""

from __future__ import annotations

from pathlib import Path

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


def test_a_sweep_file_handed_to_train_says_to_use_sweep(capsys):
    assert main(["train", str(ROOT / "sweeps" / "quickstart.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is a sweep file (it has name, axes, resources)" in err
    assert "mutransfer sweep" in err and "configs/train.yaml" in err
