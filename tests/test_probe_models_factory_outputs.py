"""A factory's model is held to what docs/models.md promises on every path that trains it:
`mutransfer train` checks it before training as a sweep does (width argument used, logits of
the right shape, token data), and the trainer itself never scores an output that does not
line up with its targets (a transposed output would be flattened against the wrong targets)
nor reads a custom loss that is not a scalar."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.errors import UserError
from mutransfer.train import run_trial
from tests.test_anymodel import GOOD

# a good factory's model (tests/test_anymodel.py), and models that break it one way each
MODULE = GOOD + textwrap.dedent("""
    import torch.nn.functional as F

    def ignores_width(width, vocab_size=256):
        return M(24, vocab_size)

    class TimeMajorWhenTraining(M):
        # (L, b, vocab) in training mode: flattened, it lines up with no target
        def forward(self, ids):
            out = super().forward(ids)
            return out.transpose(0, 1) if self.training else out

    def time_major(width, vocab_size=256):
        return TimeMajorWhenTraining(width, vocab_size)

    class PerTokenLoss(M):
        def forward(self, ids, targets):
            logits = super().forward(ids)
            return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")

    def per_token_loss(width, vocab_size=256):
        return PerTokenLoss(width, vocab_size)
""")

TRAIN = {"optimizer": "adamw", "lr": 0.01, "steps": 2, "batch_size": 2, "seq_len": 16,
         "eval_every": 2, "eval_batches": 1}


@pytest.fixture
def factories(tmp_path, monkeypatch):
    """The module above, importable from the current folder (as a user runs it)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.chdir(tmp_path)
    name = f"probe_factories_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    return name


def trial_file(tmp_path: Path, arch: str, **model) -> Path:
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({
        "width": 64, "model": {"arch": arch, "base_width": 32, **model},
        "param": {"name": "mup"}, "train": TRAIN, "data": {"source": "stdlib"}}))
    return path


def one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith("error:")]
    assert len(err) == 1, err
    return err[0]


def test_train_refuses_a_factory_that_ignores_its_width_before_training(
        factories, tmp_path, capsys):
    out = tmp_path / "r.json"
    path = trial_file(tmp_path, f"{factories}:ignores_width")
    assert main(["train", str(path), "--out", str(out)]) == 2
    assert "parameter count does not change with width" in one_error_line(capsys)
    assert not out.exists()


def test_train_refuses_a_factory_on_real_inputs_naming_the_data_not_a_role(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # examples/ importable
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({
        "width": 64, "model": {"arch": "examples.tiny_gpt:tiny_gpt", "base_width": 32},
        "train": TRAIN, "data": {"source": "synthetic", "task": "memory"}}))
    assert main(["train", str(path)]) == 2
    line = one_error_line(capsys)
    assert "needs token data" in line and "cannot infer the role" not in line


def test_train_refuses_time_major_logits_before_training(factories, tmp_path, capsys):
    path = trial_file(tmp_path, f"{factories}:time_major")
    assert main(["train", str(path)]) == 2
    assert "returned shape (8, 2, 256)" in one_error_line(capsys)


def test_the_trainer_never_scores_logits_that_do_not_line_up_with_the_targets(factories):
    """Through the Python API (no probe): the eval-mode forward is right, the training one
    is (L, b, vocab); it is refused at the first training step instead of trained on."""
    cfg = TrialConfig(width=64, model={"arch": f"{factories}:time_major", "base_width": 32},
                      param={"name": "mup"}, train=TRAIN)
    with pytest.raises(UserError, match=r"returned shape \(16, 2, 256\).*expected "
                                        r"\(2, 16, 256\)"):
        run_trial(cfg)


def test_a_custom_loss_that_is_not_a_scalar_is_one_line_not_a_traceback(factories):
    cfg = TrialConfig(width=64, model={"arch": f"{factories}:per_token_loss", "base_width": 32,
                                       "loss": "custom"},
                      param={"name": "mup"}, train=TRAIN)
    with pytest.raises(UserError, match=r"must return a scalar loss; it returned shape "
                                        r"\(2, 16\)"):
        run_trial(cfg)


def test_roles_of_a_builtin_model_on_real_inputs_are_printed(tmp_path, capsys):
    """`mutransfer roles` on S4D with the synthetic memory task: its output is checked on real
    inputs, not refused as if it were a factory needing token data."""
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump({
        "width": 32, "model": {"arch": "s4d", "n_layer": 1, "d_state": 4, "base_width": 16},
        "data": {"source": "synthetic", "task": "memory"}}))
    assert main(["roles", str(path), "--width", "24"]) == 0
    roles = yaml.safe_load(capsys.readouterr().out)["model"]["roles"]
    assert roles["lm_head.weight"] == "readout" and roles["embedding.weight"] == "embedding"
