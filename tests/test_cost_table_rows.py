"""The cost table as `validate` and `sweep --dry-run` print it, held to figures counted apart
from the cost model (helper's probe): a width whose trials are different models shows their
parameters' range as the models are built; a horizon sweep's tokens and FLOPs are what its
branched runs train, the dry run's own horizon line; a count just under a unit's next is
written in that unit."""

from __future__ import annotations

import yaml

from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.cost.model import forward_flops_per_token
from mutransfer.cost.table import cost_table, shape_of
from mutransfer.data import load_data
from mutransfer.models.build import build_model
from mutransfer.sweep.plan.cells import load_plan
from tests.sweeps import tiny_sweep


def write(tmp_path, doc: dict) -> str:
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump({**doc, "storage": str(tmp_path / doc["name"])}))
    return str(path)


def table_rows(out: str) -> dict[str, list[str]]:
    """The cost table's rows by their first cell (a width or `total`)."""
    lines = out[out.index("\ncost"):].splitlines()[2:]
    return {line.split()[0]: line.split() for line in lines if line.split()}


def built_params(config: dict) -> int:
    cfg = TrialConfig.model_validate(config)
    model = build_model(cfg, load_data(cfg.data).spec)
    return sum(p.numel() for p in model.parameters())


def test_a_width_whose_trials_are_different_models_shows_the_range_of_their_parameters(
        tmp_path, capsys):
    # before: the first trial's count alone (81.9k at width 64 for n_layer 2 and 8 alike)
    path = write(tmp_path, tiny_sweep("depths", {"width": [16, 32], "lr": [0.01],
                                                 "model.n_layer": [1, 3]}))
    assert main(["validate", path, "--no-data"]) == 0
    rows = table_rows(capsys.readouterr().out)
    for width in (16, 32):
        counts = sorted(built_params(c.config) for c in load_plan(path).cells
                        if c.width == width)
        assert counts[0] < counts[1]
        assert rows[str(width)][1] == f"{_figure(counts[0])}-{_figure(counts[1])}"


def test_a_horizon_sweeps_tokens_and_flops_are_what_its_branched_runs_train(tmp_path, capsys):
    # lengths 10, 20, 40 at cooldown 0.2: the 40-step trunk, then 20 - 16 and 10 - 8 steps of
    # cooldown; evals every 5 steps: 9 on the trunk, one on each branch (its last step)
    doc = tiny_sweep("lengths", {"lr": [0.01, 0.02], "train.steps": [10, 20, 40]})
    doc["train"] = {**doc["train"], "schedule": "wsd", "warmup": 2, "cooldown": 0.2}
    doc["train"].pop("steps")
    path = write(tmp_path, doc)
    assert main(["sweep", path, "--dry-run"]) == 0
    out = capsys.readouterr().out
    per_step = 2 * 16
    trained = 2 * (40 + 4 + 2) * per_step  # two LRs, one family each
    assert f"trains {trained:,} tokens branched" in out
    config = load_plan(path).cells[0].config
    fwd = forward_flops_per_token(shape_of(config))
    flops = 2 * fwd * (3 * (40 + 4 + 2) * per_step + (9 + 1 + 1) * per_step)
    total = table_rows(out)["total"]
    # before: 4.5k tokens (every length from step 0), and their FLOPs
    assert total[1:4] == ["6", _figure(trained),
                          _figure(flops)]


def _figure(x: float) -> str:
    """x as the table writes a count, worked out here: one decimal, k/M/G/T/P/E."""
    for i, unit in reversed(list(enumerate("kMGTPE", start=1))):
        if round(x / 1000**i, 1) >= 1:
            return f"{x / 1000**i:.1f}{unit}"
    return f"{x:.0f}"


def test_a_count_that_rounds_up_to_the_next_unit_is_written_in_it():
    # 31,249 steps of 32 tokens: 999,968 tokens (before, "1000.0k")
    config = TrialConfig(width=16, model={"n_layer": 1, "base_width": 16},
                         train={"steps": 31249, "batch_size": 2, "seq_len": 16}
                         ).model_dump(mode="json")
    row = cost_table([config], gpu=None).splitlines()[2].split()
    assert row[4] == "1.0M"
