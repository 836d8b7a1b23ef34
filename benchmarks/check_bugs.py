"""Planted-bug suite of `mutransfer check`: does it FAIL each bug, naming the right role, and
PASS the correct models?

From a correct mup_ssm Mamba (the built-in, through the seam) and a correct mup tiny GPT
(examples/tiny_gpt.py), one bug at a time:

    dt_bias_ln2        the Δ bias left at softplus⁻¹(ln 2) = 0 in every channel (Mamba)
    wbc_vector         W_B/W_C classed vector-like (the mup table: Adam LR not scaled) (Mamba)
    readout_no_mult    the readout's 1/m multiplier missing
    hidden_lr          hidden weights' Adam LR not scaled (η instead of η/m)
    embedding_init     the embedding initialised at std 1/√width
    hidden_init        one hidden layer's init not scaled (a width-independent std)

and single-tensor bugs (issue 29), each on one parameter tensor only (`SINGLE`): its Adam LR
off by a power ±1 of m = width/base_width (init unchanged), or its init off by m^±½:

    Mamba     lr_out_proj_up (hidden, ×m), lr_x_proj_B_down (ssm_B, ×1/m),
              lr_embedding_up (embedding, ×m), lr_D_up (vector, ×m),
              init_x_proj_C (ssm_C, init ×m^½)
    tiny GPT  lr_proj_up (hidden, ×m), lr_head_down (readout, ×1/m), lr_qkv_down (hidden, ×1/m),
              lr_ln_up (vector, ×m), init_fc_out (hidden, init ×m^-½)

An LR bug is planted as the optimizer would make it: after every optimizer step, the change of
that one tensor since the last forward is multiplied by the gain (a forward pre-hook on the
model; the first forward only records the weights the parameterization left). The tensor's name,
module and init stay as they are, so the check sees the model exactly as a user's model with
that bug.

    python benchmarks/check_bugs.py                   # coordinate stage, every bug, 3 seed sets
    python benchmarks/check_bugs.py --full BUG ...    # the full check (transfer too) for these

The planted models are factories of this file (`model.arch: benchmarks.check_bugs:...`), so
they go through the same seam as any user's model. Times are wall-clock on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.tiny_gpt import TinyGPT, tiny_gpt  # noqa: E402

# bug -> the role the check must name
EXPECTED = {"dt_bias_ln2": "vector", "wbc_vector": "ssm_B|ssm_C", "readout_no_mult": "readout",
            "hidden_lr": "hidden", "embedding_init": "embedding", "hidden_init": "hidden"}
# single-tensor bugs: model -> bug -> (what: lr/init, the tensor, exponent of m on it)
SINGLE = {
    "mamba": {"lr_out_proj_up": ("lr", "layers.1.mixer.out_proj.weight", 1.0),
              "lr_x_proj_B_down": ("lr", "layers.0.mixer.x_proj_B.weight", -1.0),
              "lr_embedding_up": ("lr", "embedding.weight", 1.0),
              "lr_D_up": ("lr", "layers.0.mixer.D", 1.0),
              "init_x_proj_C": ("init", "layers.1.mixer.x_proj_C.weight", 0.5)},
    "gpt": {"lr_proj_up": ("lr", "blocks.1.proj.weight", 1.0),
            "lr_head_down": ("lr", "head.weight", -1.0),
            "lr_qkv_down": ("lr", "blocks.0.qkv.weight", -1.0),
            "lr_ln_up": ("lr", "blocks.0.ln2.weight", 1.0),
            "init_fc_out": ("init", "blocks.1.fc_out.weight", -0.5)},
}
MAMBA_BUGS = list(EXPECTED) + list(SINGLE["mamba"])
GPT_BUGS = ["readout_no_mult", "hidden_lr", "embedding_init", "hidden_init", *SINGLE["gpt"]]
SEED_SETS = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


# -- planted factories ------------------------------------------------------------------------

class UpdateGain:
    """Multiply one tensor's every optimizer update by `gain`: its LR times `gain`.

    A forward pre-hook on the model: the tensor's change since the last forward (an optimizer
    step; zero in eval) is scaled in place. The first forward only records the weights (the
    parameterization rescales the init after the factory returns)."""

    def __init__(self, param: torch.nn.Parameter, gain: float) -> None:
        self.param, self.gain, self.last = param, gain, None

    def __call__(self, _module, _inputs) -> None:
        with torch.no_grad():
            if self.last is not None:
                self.param.add_((self.param - self.last) * (self.gain - 1.0))
            self.last = self.param.detach().clone()


def plant_single(model: torch.nn.Module, model_kind: str, bug: str, m: float) -> None:
    """Plant SINGLE[model_kind][bug] (if it is one) into `model` at width multiplier m."""
    if bug not in SINGLE[model_kind]:
        return
    what, name, exponent = SINGLE[model_kind][bug]
    param = dict(model.named_parameters())[name]
    if what == "lr":
        model.register_forward_pre_hook(UpdateGain(param, m**exponent))
    else:
        with torch.no_grad():
            param.mul_(m**exponent)


def planted_mamba(width: int, vocab_size: int = 256, bug: str = "", base_width: int = 64,
                  n_layer: int = 2, d_state: int = 16):
    """The built-in Mamba (reference init, roles declared by its modules) with a bug planted."""
    from mutransfer.config import TrialConfig
    from mutransfer.data.base import DataSpec
    from mutransfer.models.builtin import sequence_model

    cfg = TrialConfig(width=width, model={"arch": "mamba", "base_width": base_width,
                                          "n_layer": n_layer, "d_state": d_state})
    spec = DataSpec("tokens", vocab_size, None, vocab_size, "ce")
    model = sequence_model(cfg, spec, width)
    with torch.no_grad():
        if bug == "dt_bias_ln2":  # softplus(0) = ln 2: every channel's Δ = 0.69
            for layer in model.layers:
                layer.mixer.dt_proj.bias.zero_()
        elif bug == "hidden_init":  # layer 0's in_proj keeps its base-width std at every width
            model.layers[0].mixer.in_proj.weight.mul_(math.sqrt(width / base_width))
    plant_single(model, "mamba", bug, width / base_width)
    return model


class NoReadoutMult(TinyGPT):
    """The tiny GPT whose forward forgets `readout_mult` (the attribute is there, unused)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def planted_gpt(width: int, vocab_size: int = 256, bug: str = "", base_width: int = 64,
                n_layer: int = 2, head_dim: int = 16, max_len: int = 64):
    """examples/tiny_gpt.py with a bug planted."""
    if bug == "readout_no_mult":
        return NoReadoutMult(width, vocab_size, n_layer, head_dim, max_len)
    model = tiny_gpt(width, vocab_size, n_layer, head_dim, max_len)
    with torch.no_grad():
        if bug == "embedding_init":
            model.tok.weight.normal_(0.0, width**-0.5)
            model.pos.weight.normal_(0.0, width**-0.5)
        elif bug == "hidden_init":  # block 0's MLP input layer at its base-width std
            model.blocks[0].fc.weight.mul_(math.sqrt(width / base_width))
    plant_single(model, "gpt", bug, width / base_width)
    return model


# -- check files --------------------------------------------------------------------------------

def check_spec(model: str, bug: str, seeds: list[int], widths: list[int]) -> dict:
    """The check file (as a dict) of one planted bug ('' = the correct model)."""
    train = {"optimizer": "adamw", "steps": 40, "batch_size": 8, "seq_len": 32, "warmup": 4,
             "schedule": "cosine", "eval_every": 20, "eval_batches": 2}
    param: dict = {"name": "mup_ssm" if model == "mamba" else "mup"}
    overrides = {"readout_no_mult": {"readout": {"mult_m": 0.0}},
                 "hidden_lr": {"hidden": {"lr_adam_m": 0.0}},
                 "embedding_init": {"embedding": {"init_m": -0.5}}}
    if model == "mamba":
        arch = {"arch": "mamba", "n_layer": 2, "d_state": 16, "base_width": widths[0]}
        if bug in ("dt_bias_ln2", "hidden_init", *SINGLE["mamba"]):
            arch = {"arch": "benchmarks.check_bugs:planted_mamba", "base_width": widths[0],
                    "options": {"bug": bug, "base_width": widths[0]}}
        elif bug == "wbc_vector":
            param = {"name": "mup"}  # the mup table classes W_B, W_C vector-like
        elif bug in overrides:
            param["overrides"] = overrides[bug]
    else:
        arch = {"arch": "benchmarks.check_bugs:planted_gpt", "base_width": widths[0],
                "options": {"bug": bug, "base_width": widths[0]}}
        if bug == "hidden_lr":
            param["overrides"] = overrides[bug]
    name = f"bug_{model}_{bug or 'correct'}_s{seeds[0]}"
    return {"name": name, "model": arch, "param": param, "train": train,
            "data": {"source": "stdlib"},
            "check": {"widths": widths, "seeds": [0, 1], "lr": {"log2": [-10, -3],
                                                               "per_octave": 1},
                      "coord": {"steps": 3, "seeds": seeds, "batch_size": 4, "seq_len": 32},
                      "search": {"window": 3}}}


def run_one(spec: dict, out: Path, full: bool) -> dict:
    """`mutransfer check` on one spec (the CLI's entry point, in this process: the imports
    are paid once); its verdict.json, with the wall time."""
    import contextlib
    import io

    import yaml

    from mutransfer.cli import main as cli

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    argv = ["check", str(path), "--out", str(out / spec["name"]), "--num-cpus", "2"]
    t0 = time.time()
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        code = cli(argv + ([] if full else ["--coord-only"]))
    (out / f"{spec['name']}.log").write_text(log.getvalue())
    verdict_file = out / spec["name"] / "verdict.json"
    if not verdict_file.exists():
        return {"verdict": f"error (exit {code})", "seconds": time.time() - t0}
    v = json.loads(verdict_file.read_text())
    v["seconds"] = time.time() - t0
    return v


def named(model: str, bug: str, v: dict) -> tuple[str, bool]:
    """What the check named (the tensor for a single-tensor bug, else the role) and whether it
    is the planted one."""
    if bug in SINGLE[model]:
        tensor = SINGLE[model][bug][1]
        params = list(v.get("culprit_params") or {})
        return (params[0] if params else "-"), tensor in params
    role = v.get("named_role") or "-"
    return role, role in EXPECTED.get(bug, "").split("|")


def exponents(v: dict) -> str:
    """'+0.50 (expected -0.50)' for a parameter's exponent, the slope for an activation."""
    slope, expected = v.get("culprit_slope"), v.get("culprit_expected")
    if slope is None:
        return "-"
    return f"{slope:+.2f}" + (f" (expected {expected:+.2f})" if expected is not None else "")


def row(model: str, bug: str, seeds: list[int], v: dict, full: bool) -> str:
    verdict = v["verdict"]
    if not full and verdict == "INCONCLUSIVE":
        verdict = "coord PASS"
    if bug:
        what, right = named(model, bug, v)
        ok = "✓" if right and verdict == "FAIL" else "✗"
    else:
        what, ok = "-", ("✓" if verdict in ("PASS", "coord PASS") else "✗")
    drift = "-"
    if v.get("drift") is not None:
        lo, hi = v.get("drift_low"), v.get("drift_high")
        ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else ""
        drift = f"{v['drift']:+.2f}{ci}"
    seeds_text = f"{seeds[0]}-{seeds[-1]}"
    return (f"| {model} | {bug or 'correct'} | {seeds_text} | {verdict} | {what} {ok} | "
            f"{v.get('culprit') or '-'} | {exponents(v)} | {drift} | {v['seconds']:.0f} s |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/check_bugs")
    p.add_argument("--models", nargs="+", default=["mamba", "gpt"])
    p.add_argument("--widths", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--full", nargs="*", default=[], metavar="BUG",
                   help="bugs ('correct' for the correct model) to run the full check on")
    p.add_argument("--bugs", nargs="*", default=None, help="only these bugs")
    p.add_argument("--seed-sets", type=int, default=3, help="seed sets for the correct models")
    p.add_argument("--skip-seed-sets", type=int, default=0,
                   help="leave out the first N seed sets of the correct models (measured)")
    args = p.parse_args()
    out = Path(args.out).absolute()
    os.chdir(ROOT)  # the planted factories are benchmarks.check_bugs:..., imported from here
    print("| model | bug | coord seeds | verdict | named (tensor or role) | culprit | exponent |"
          " drift [95%] | time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.models:
        bugs = MAMBA_BUGS if model == "mamba" else GPT_BUGS
        runs = [(b, SEED_SETS[0]) for b in bugs] + [("", s) for s in SEED_SETS[:args.seed_sets]]
        for bug, seeds in runs:
            if args.bugs is not None and (bug or "correct") not in args.bugs:
                continue
            if not bug and seeds in SEED_SETS[:args.skip_seed_sets]:
                continue
            full = (bug or "correct") in args.full and seeds == SEED_SETS[0]
            spec = check_spec(model, bug, seeds, args.widths)
            v = run_one(spec, out, full)
            print(row(model, bug, seeds, v, full), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
