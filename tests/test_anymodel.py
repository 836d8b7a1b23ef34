"""Any model through one seam: factories, roles (patterns, declared, inferred), the generic
parameterization, `mutransfer roles`, `validate --import`, and their bad input."""

from __future__ import annotations

import math
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.data.base import DataSpec
from mutransfer.errors import UserError
from mutransfer.models.build import build_model
from mutransfer.models.factory import probe
from mutransfer.optim import make_optimizer
from mutransfer.param.apply import apply_parameterization
from mutransfer.param.roles import infer_roles, pattern_roles

REPO = Path(__file__).resolve().parents[1]
SPEC = DataSpec("tokens", 32, None, 32, "ce")
GPT = "examples.tiny_gpt:tiny_gpt"


@pytest.fixture(autouse=True)
def _restore_path(monkeypatch):
    """expose_cwd changes sys.path and PYTHONPATH: undo after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.chdir(REPO)


def gpt_cfg(width=64, param="mup", **model):
    return TrialConfig(width=width, model={"arch": GPT, "base_width": 32,
                                           "options": {"n_layer": 1, "max_len": 16}, **model},
                       param={"name": param})


def test_patterns_first_match_wins_and_every_name_needs_one():
    names = ["a.in_proj.weight", "a.out.weight", "head.weight"]
    roles = pattern_roles(names, {"*.in_proj.weight": "hidden", "head.*": "readout",
                                  "*": "vector"})
    assert roles == {"a.in_proj.weight": "hidden", "a.out.weight": "vector",
                     "head.weight": "readout"}
    with pytest.raises(UserError, match="'a.out.weight' matches no pattern"):
        pattern_roles(names, {"*.in_proj.weight": "hidden", "head.*": "readout"})
    with pytest.raises(UserError, match="pattern 'nothing.*' matches no parameter"):
        pattern_roles(names, {"*": "hidden", "nothing.*": "vector"})


def test_inferred_roles_of_the_tiny_gpt():
    from examples.tiny_gpt import tiny_gpt

    roles = infer_roles(tiny_gpt(32, 32, 1, max_len=16), tiny_gpt(64, 32, 1, max_len=16), 32)
    assert roles["tok.weight"] == roles["pos.weight"] == "embedding"
    assert roles["blocks.0.qkv.weight"] == roles["blocks.0.fc_out.weight"] == "hidden"
    assert roles["blocks.0.ln1.bias"] == roles["ln_f.weight"] == "vector"
    assert roles["head.weight"] == "readout"


class _SSMish(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(32, width)
        self.to_state = nn.Linear(width, 16, bias=False)  # fan-in only, not the vocabulary
        self.head = nn.Linear(width, 32, bias=False)


def test_ambiguous_parameters_are_refused_by_name():
    with pytest.raises(UserError, match="cannot infer the role of to_state.weight"):
        infer_roles(_SSMish(32), _SSMish(64), 32)


def test_builtin_mamba_goes_through_the_seam_with_declared_roles():
    cfg = TrialConfig(width=128, model={"base_width": 64}, param={"name": "mup_ssm"})
    model = build_model(cfg, SPEC)
    roles = model.mutransfer_roles
    assert roles["layers.0.mixer.x_proj_B.weight"] == "ssm_B"
    assert roles["embedding.weight"] == "embedding"
    assert model.readout_mult == pytest.approx(0.5)


def test_generic_parameterization_of_a_factory_model():
    sp = build_model(gpt_cfg(param="sp"), SPEC)
    torch.manual_seed(0)
    mup = build_model(gpt_cfg(param="mup"), SPEC)
    # readout: base-width std (×√m over the factory's 1/√fan_in), logits × 1/m
    ratio = mup.head.weight.std().item() / sp.head.weight.std().item()
    assert ratio == pytest.approx(math.sqrt(2), rel=0.1)
    assert mup.readout_mult == pytest.approx(0.5) and sp.readout_mult == 1.0
    # hidden keeps the factory's init; its Adam LR is lr/m
    assert mup.blocks[0].qkv.weight.std().item() == pytest.approx(
        sp.blocks[0].qkv.weight.std().item(), rel=0.1)
    groups = {g["role"]: g for g in make_optimizer(mup, gpt_cfg(param="mup")).param_groups}
    assert groups["hidden"]["lr_scale"] == pytest.approx(0.5)
    assert groups["embedding"]["lr_scale"] == 1.0


class _Untied(nn.Module):
    """No readout_mult attribute: the readout's multiplier goes on its module's output."""

    def __init__(self, width: int, vocab_size: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.head = nn.Linear(width, vocab_size, bias=False)

    def forward(self, ids):
        return self.head(self.emb(ids))


class _Tied(nn.Module):
    """Readout tied to the embedding, and no readout_mult: no hook for the 1/m multiplier."""

    def __init__(self, width: int, vocab_size: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.hid = nn.Linear(width, width)

    def forward(self, ids):
        return self.emb(ids) @ self.emb.weight.t()


def test_readout_multiplier_goes_on_a_hook_or_is_refused(monkeypatch):
    import tests.test_anymodel as me

    cfg = TrialConfig(width=64, model={"arch": "tests.test_anymodel:_Untied", "base_width": 32},
                      param={"name": "mup"})
    model = build_model(cfg, SPEC)
    ids = torch.randint(0, 32, (1, 4))
    raw = model.head.weight @ model.emb(ids)[0, 0]
    assert torch.allclose(model(ids)[0, 0], raw * 0.5, atol=1e-6)
    monkeypatch.setattr(me, "_Untied", _Tied)
    with pytest.raises(UserError, match="readout's forward multiplier has no hook"):
        build_model(cfg, SPEC)


def _write(tmp_path: Path, module: str, body: str, config: dict) -> Path:
    import yaml

    (tmp_path / f"{module}.py").write_text(body)
    path = tmp_path / "check.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


GOOD = textwrap.dedent("""
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self, width, vocab_size=256):
            super().__init__()
            self.emb = nn.Embedding(vocab_size, width)
            self.hid = nn.Linear(width, width)
            self.head = nn.Linear(width, vocab_size, bias=False)
            self.readout_mult = 1.0

        def forward(self, ids):
            return self.head(self.hid(self.emb(ids))) * self.readout_mult
""")

BAD = {
    "raises": (GOOD + "\ndef make(width, **kw):\n    raise RuntimeError('boom')\n", {},
               "the factory raised at width"),
    "shape": (GOOD + "\nclass S(M):\n    def forward(self, ids):\n"
                     "        return super().forward(ids)[..., 0]\n"
                     "\ndef make(width, **kw):\n    return S(width)\n", {},
              "returned shape (2, 8) for token ids (2, 8); expected logits"),
    "count": (GOOD + "\ndef make(width, **kw):\n    return M(16)\n", {},
              "parameter count does not change with width"),
    "pattern": (GOOD + "\ndef make(width, **kw):\n    return M(width)\n",
                {"roles": {"*": "hidden", "nope.*": "vector"}},
                "pattern 'nope.*' matches no parameter"),
    "unmatched": (GOOD + "\ndef make(width, **kw):\n    return M(width)\n",
                  {"roles": {"emb.*": "embedding", "hid.*": "hidden"}},
                  "parameter 'head.weight' matches no pattern"),
    # issue 31: the user's code ends the process (0 read as PASS by `check`) unless caught
    "exit0": ("import sys\nsys.exit(0)\n" + GOOD, {}, "called sys.exit(0)"),
    "exit7": (GOOD + "\ndef make(width, **kw):\n    raise SystemExit(7)\n", {},
              "called sys.exit(7)"),
}


@pytest.mark.parametrize("case", [*BAD, "import"])
@pytest.mark.parametrize("command", ["check", "roles"])
def test_bad_factories_one_line_exit_2_nothing_written(tmp_path, monkeypatch, capsys, case,
                                                       command):
    monkeypatch.chdir(tmp_path)
    module = f"userfac_{case}_{command}"
    body, extra, message = BAD.get(case, (GOOD, {}, f"cannot import {module}_missing"))
    arch = f"{module}_missing:make" if case == "import" else f"{module}:make"
    out = tmp_path / "out"
    path = _write(tmp_path, module, body, {
        "name": "bad", "model": {"arch": arch, "base_width": 32, **extra},
        "data": {"source": "stdlib"}, "param": {"name": "mup"}, "storage": str(out),
        "check": {"widths": [32, 64]}})
    if command == "roles":
        path.write_text(path.read_text().replace("check:\n  widths:\n  - 32\n  - 64\n", "")
                        .replace(f"storage: {out}\n", ""))
    assert main([command, str(path)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines()
              if not line.startswith(("preparing", "token cache"))]  # the data's own notes
    assert len(errors) == 1 and message in errors[0], errors
    assert not out.exists()


def test_validate_import_turns_a_factory_exit_into_one_line(tmp_path, monkeypatch, capsys):
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "userfac_exits.py").write_text("import sys\nsys.exit(0)\n" + GOOD)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "v", "model": {"arch": "userfac_exits:make", "base_width": 32},
        "data": {"source": "stdlib"}, "train": {"steps": 2},
        "axes": {"width": [32, 64], "lr": [0.001], "parameterization": ["mup"]}}))
    assert main(["validate", "--import", str(sweep)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("error: model.arch userfac_exits:make: importing userfac_exits called "
                   "sys.exit(0); a factory module must not exit (nor parse the command line) "
                   "when imported")


def test_a_factory_module_parsing_argv_at_import_sees_only_its_own_name(
        tmp_path, monkeypatch, capsys):
    """argparse at import reads sys.argv: mutransfer's own options are not its to refuse."""
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, "userfac_argv", textwrap.dedent("""
        import argparse, sys
        ARGV = list(sys.argv)
        OPTIONS = argparse.ArgumentParser().parse_args()
    """) + GOOD + "\ndef make(width, **kw):\n    return M(width)\n", {
        "model": {"arch": "userfac_argv:make", "base_width": 32}, "data": {"source": "stdlib"},
        "param": {"name": "mup"}})
    assert main(["roles", str(path)]) == 0
    import userfac_argv

    assert userfac_argv.ARGV == ["userfac_argv"]


def test_validate_imports_a_factory_only_when_asked(tmp_path, monkeypatch, capsys):
    import yaml

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "imported"
    (tmp_path / "userfac_marker.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n" + GOOD
        + "\ndef make(width, **kw):\n    return M(width)\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "v", "model": {"arch": "userfac_marker:make", "base_width": 32},
        "data": {"source": "stdlib"}, "train": {"steps": 2},
        "axes": {"width": [32, 64], "lr": [0.001], "parameterization": ["mup"]}}))
    assert main(["validate", str(sweep)]) == 0
    assert not marker.exists()
    assert "not imported" in capsys.readouterr().out
    assert main(["validate", "--import", str(sweep)]) == 0
    assert marker.exists()


def test_custom_loss_model_trains(tmp_path, monkeypatch):
    from mutransfer.train import run_trial

    monkeypatch.chdir(tmp_path)
    (tmp_path / "userfac_loss.py").write_text(GOOD + textwrap.dedent("""
        import torch.nn.functional as F

        class L(M):
            def forward(self, ids, targets):
                logits = super().forward(ids)
                return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

        def make(width, **kw):
            return L(width, **kw)
    """))
    cfg = TrialConfig(width=32, model={"arch": "userfac_loss:make", "base_width": 32,
                                       "loss": "custom"},
                      param={"name": "mup"}, data={"source": "stdlib"},
                      train={"steps": 3, "batch_size": 2, "seq_len": 8, "eval_every": 3,
                             "eval_batches": 1})
    result = run_trial(cfg)
    assert result.status == "complete" and math.isfinite(result.final_eval_loss)
    assert probe(cfg.model_copy(update={"width": 64}), DataSpec("tokens", 256, None, 256,
                                                                "ce")).roles


def test_roles_command_prints_a_pasteable_table(capsys):
    import yaml

    assert main(["roles", "examples/tiny_gpt.yaml"]) == 0
    text = capsys.readouterr().out
    table = yaml.safe_load(text)
    assert table["model"]["roles"]["head.weight"] == "readout"
    cfg = gpt_cfg(roles=table["model"]["roles"] | {}, options={"n_layer": 2, "max_len": 64})
    assert probe(cfg, DataSpec("tokens", 256, None, 256, "ce")).roles == \
        table["model"]["roles"]


def test_roles_refuses_width_0_instead_of_reading_it_as_unset(capsys):
    assert main(["roles", "examples/tiny_gpt.yaml", "--width", "0"]) == 2
    assert "--width 0: give a width above model.base_width" in capsys.readouterr().err


def test_apply_is_unchanged_for_builtin_declared_roles():
    """Declared roles given explicitly or not: the same model (the seam adds nothing)."""
    cfg = TrialConfig(width=128, model={"base_width": 64}, param={"name": "mup_ssm"})
    torch.manual_seed(1)
    a = build_model(cfg, SPEC)
    from mutransfer.models.builtin import sequence_model

    torch.manual_seed(1)
    b = sequence_model(cfg, SPEC, 128)
    apply_parameterization(b, cfg)
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), n


def test_sweep_refuses_a_bad_factory_before_any_trial(tmp_path, monkeypatch, capsys):
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "userfac_sweep.py").write_text(
        GOOD + "\ndef make(width, **kw):\n    return M(16)\n")
    sweep = tmp_path / "sweep.yaml"
    out = tmp_path / "out"
    sweep.write_text(yaml.safe_dump({
        "name": "s", "model": {"arch": "userfac_sweep:make", "base_width": 32},
        "data": {"source": "stdlib"}, "train": {"steps": 2}, "storage": str(out),
        "axes": {"width": [32, 64], "lr": [0.001], "parameterization": ["mup"]}}))
    assert main(["sweep", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "parameter count does not change with width" in err.splitlines()[-1]
    assert not out.exists()
