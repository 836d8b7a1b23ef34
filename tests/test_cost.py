"""The cost model: parameter counts exactly as the model is built, the activation memory as
autograd keeps it (saved-tensor hooks, CPU), GPU shares, the cost table and refusals."""

from __future__ import annotations

import pytest
import torch

from mutransfer.config import TrialConfig
from mutransfer.cost.model import Shape, estimate, param_count
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
    rows = {int(w): float(t) for w, t in re.findall(r"^\| (\d+) \| (\d+) \|$", section, re.M)}
    assert rows == GPUS["h100"].measured.tokens_per_s
