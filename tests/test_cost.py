"""The cost model: parameter counts exactly as the model is built, the activation memory as
autograd keeps it (saved-tensor hooks, CPU), GPU shares, the cost table and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from benchmarks.memory_estimate import rss_config, trial_rss
from mutransfer.cli import main
from mutransfer.config import TrialConfig
from mutransfer.cost.machine import step_beyond_memory, step_floor_bytes
from mutransfer.cost.model import (
    CPU_RESERVE_BYTES,
    CUDA_RESERVE_BYTES,
    Shape,
    estimate,
    heap_bytes,
    layer_activation_bytes,
    param_count,
)
from mutransfer.cost.table import cost_table, estimate_config, gpu_share, shape_of
from mutransfer.data.base import DataSpec
from mutransfer.models.build import build_model
from mutransfer.train import loss_fn


def trial(width=32, vocab=256, **kw) -> tuple[dict, DataSpec]:
    model = {"n_layer": 2, "base_width": 16, **kw.pop("model", {})}
    train = {"batch_size": 2, "seq_len": 64, **kw.pop("train", {})}
    config = TrialConfig(width=width, model=model, train=train, **kw).model_dump(mode="json")
    spec = DataSpec(kind="tokens", vocab_size=vocab, input_dim=None, output_dim=vocab,
                    loss="ce")
    return config, spec


def shape(config: dict, vocab: int) -> Shape:
    return Shape.of(config, vocab)


@pytest.mark.parametrize("width,extra", [
    (16, {}), (48, {}), (64, {"model": {"n_layer": 3, "d_state": 8, "expand": 3}}),
    (32, {"model": {"tie_embeddings": False}}), (32, {"param": {"name": "mup_ssm"}}),
    (32, {"model": {"arch": "s4d", "d_state": 8}}),
    (32, {"model": {"arch": "s4d", "d_state": 8, "s4d": {"output": "gated"}}}),
    (48, {"model": {"arch": "mamba2", "d_state": 8, "mamba2": {"headdim": 8, "ngroups": 2}}}),
    (64, {"model": {"arch": "mamba2", "mamba2": {"headdim": 8, "widen": "headdim"}}}),
])
def test_parameter_counts_are_the_built_models(width, extra):
    config, spec = trial(width, vocab=300, **extra)
    model = build_model(TrialConfig.model_validate(config), spec)
    assert param_count(shape(config, 300)) == sum(p.numel() for p in model.parameters())


def saved_bytes(config: dict, spec: DataSpec) -> int:
    """Bytes of the tensors autograd saves in one training forward, as the trainer runs it
    (weights excluded; every storage counted once)."""
    cfg = TrialConfig.model_validate(config)
    model = build_model(cfg, spec)
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    b, n = cfg.train.batch_size, cfg.train.seq_len
    x, y = torch.randint(0, spec.vocab_size, (b, n)), torch.randint(0, spec.vocab_size, (b, n))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn("ce")(model(x), y)
    return sum(seen.values())


@pytest.mark.parametrize("width,vocab,extra", [
    (32, 256, {}), (64, 1000, {"train": {"batch_size": 4, "seq_len": 128}}),
    (48, 256, {"model": {"n_layer": 3, "d_state": 8}, "param": {"name": "mup_ssm"}}),
    (128, 256, {"train": {"batch_size": 8, "seq_len": 256}}),  # several scan chunks
])
def test_cpu_activation_memory_is_what_autograd_saves(width, vocab, extra):
    config, spec = trial(width, vocab, **extra)
    est = estimate(shape(config, vocab), "cpu")
    measured = saved_bytes(config, spec)
    # what the estimate leaves out: A = -exp(A_log) and its mask product, per layer, which
    # do not grow with the tokens
    assert est.activation_bytes == pytest.approx(measured, rel=0.01)


def test_gpu_shares_pack_by_memory_with_a_margin():
    config, _ = trial(256, train={"batch_size": 32, "seq_len": 512, "device": "cuda"},
                      data={"tokenizer": "gpt2"})
    est = estimate_config(config)
    share = gpu_share(est, 80)
    k = round(1 / share)
    assert k * 1.2 * est.peak_bytes <= 80e9 < (k + 1) * 1.2 * est.peak_bytes
    assert gpu_share(est, est.peak_gb) is None  # no room for the margin


def test_the_cuda_estimate_counts_the_loss_at_a_large_vocabulary():
    config, _ = trial(256, train={"batch_size": 32, "seq_len": 512, "device": "cuda"},
                      data={"tokenizer": "gpt2"})
    s = shape_of(config)
    est = estimate(s)
    assert s.vocab == 50257 and est.params == param_count(s)
    # the log-softmax kept for the backward: 4 bytes per token and vocabulary entry
    assert est.activation_bytes > 4 * 50257 * 32 * 512
    assert est.flops == pytest.approx(
        est.flops_per_token * est.train_tokens + est.flops_per_token / 3 * est.eval_tokens)


def test_the_cost_table_has_a_row_per_width_and_a_total():
    configs = [trial(w, train={"device": "cuda", "steps": 100})[0] for w in (32, 64, 64)]
    text = cost_table(configs, gpu="h100")
    lines = text.splitlines()
    assert "H100 GPU-h" in lines[1] and lines[2].split()[0] == "32"
    assert lines[3].split()[0] == "64" and lines[3].split()[3] == "2"  # two trials at 64
    assert lines[-1].split()[:2] == ["total", "3"]
    assert "30% of the H100" in cost_table(configs, gpu="h100", mfu=0.3)


def test_the_measured_throughput_is_the_one_benchmarks_readme_shows():
    import re
    from pathlib import Path

    from mutransfer.cost.gpus import GPUS

    text = (Path(__file__).parent.parent / "benchmarks" / "README.md").read_text()
    section = text.split("## Throughput for cost estimates", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \|$", section, re.M)
    assert {int(r[0]): float(r[1]) for r in rows} == GPUS["h100"].measured.tokens_per_s
    assert {int(r[0]): float(r[2]) for r in rows} == GPUS["h200"].measured.tokens_per_s


def test_the_cpu_estimate_holds_the_peak_rss_a_trial_adds_to_its_process():
    """run_trial in a fresh process (benchmarks/memory_estimate.py): the estimate's peak less
    the process's own reserve is at least what the peak RSS grows by, and not twice it.
    Before, it counted the live tensors only (19 MB here, 35-37 MB measured): glibc's heap
    keeps about as much again of the activations (mutransfer/cost/model.py)."""
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("peak RSS is reset and read through Linux's /proc")
    config = rss_config("mamba", 64, 2, 8, 128, steps=4)
    est = estimate(Shape.of(config, 256), "cpu")
    m = trial_rss(config)
    grown = m["peak"] - m["base"]
    assert grown <= est.peak_bytes - est.reserve_bytes <= 2 * grown


def test_the_cpu_estimate_counts_the_process_and_the_heaps_retention_and_cuda_does_not():
    config, _ = trial(256, train={"batch_size": 8, "seq_len": 128})
    s = shape(config, 256)
    cpu, cuda = estimate(s, "cpu"), estimate(s, "cuda")
    assert cpu.reserve_bytes == CPU_RESERVE_BYTES and cuda.reserve_bytes == CUDA_RESERVE_BYTES
    assert cuda.allocator_bytes == 0
    # every tensor here is under glibc's 32 MiB: the heap holds activations and workspace
    assert heap_bytes(s, "cpu") == pytest.approx(cpu.activation_bytes + cpu.workspace_bytes)
    assert cpu.allocator_bytes > cpu.activation_bytes
    assert cpu.peak_bytes == pytest.approx(
        cpu.weights_bytes + cpu.activation_bytes + cpu.workspace_bytes + cpu.allocator_bytes
        + CPU_RESERVE_BYTES)


def test_blocks_whose_tensors_are_mmapped_are_not_counted_as_the_heaps():
    # (24 x 1024 tokens, d_inner 512) float32: 50 MB a tensor, mmapped and given back
    config, _ = trial(256, train={"batch_size": 24, "seq_len": 1024})
    s = shape(config, 256)
    blocks = s.n_layer * layer_activation_bytes(s, "cpu") * s.tokens_per_step
    est = estimate(s, "cpu")
    # the head's (24 x 1024, 256) tensors are 25 MB: still the heap's
    assert heap_bytes(s, "cpu") == pytest.approx(
        est.activation_bytes - blocks + est.workspace_bytes)


def test_a_trial_whose_activations_outgrow_the_machine_is_refused_in_one_line(tmp_path, capsys):
    """Its weights and one batch's ids fit; what one step keeps for the backward (~1 TB)
    does not. Before, only the weights and the ids were checked: the sweep started."""
    (tmp_path / "results").mkdir()
    doc = {"name": "long", "storage": str(tmp_path / "results" / "long"),
           "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
           "train": {"steps": 2, "batch_size": 1 << 12, "seq_len": 1 << 16, "eval_every": 2},
           "axes": {"width": [16], "lr": [0.01]}}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(doc))
    rc = main(["sweep", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and out == "", err
    assert "width 16, n_layer 1: one training step does not fit in memory" in err
    assert "lower train.batch_size (4096) or train.seq_len (65536)" in err
    assert not any((tmp_path / "results").iterdir())


def test_the_step_bound_is_weights_and_saved_activations():
    config, _ = trial(64, train={"batch_size": 8, "seq_len": 128, "steps": 3})
    est = estimate_config(config, "cpu")
    floor = step_floor_bytes(est, 3)
    assert floor == est.weights_bytes + est.activation_bytes < est.peak_bytes
    assert step_beyond_memory(config, floor) is None
    assert "one training step does not fit" in step_beyond_memory(config, floor - 1)
    # one step: no gradient or optimizer state exists yet beside the activations
    assert step_floor_bytes(est, 1) == 4 * est.params + est.activation_bytes


def test_a_gpu_trials_activations_are_not_held_against_the_hosts_memory():
    """They live on the GPU (check_fit judges them against its memory)."""
    config, _ = trial(64, train={"batch_size": 8, "seq_len": 128, "steps": 3, "device": "cuda"})
    assert step_beyond_memory(config, 1.0) is None
