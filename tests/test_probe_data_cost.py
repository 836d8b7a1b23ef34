"""The cost table as a user meets it (helper's probe): a model it does not count is not given
another model's numbers, every tokenizers JSON file has a vocabulary, and --mfu alone gives
GPU-hours."""

from __future__ import annotations

import json

import pytest

from mutransfer.config import TrialConfig
from mutransfer.cost.table import cost_table, estimate_config
from mutransfer.cost.vocab import _json_vocab
from mutransfer.errors import UserError

FACTORY = {"arch": "examples.tiny_gpt:tiny_gpt", "base_width": 64,
           "options": {"n_layer": 2, "head_dim": 16, "max_len": 64}}


def config(width: int = 64, model: dict | None = None, **train) -> dict:
    train = {"batch_size": 2, "seq_len": 16, "steps": 3, **train}
    return TrialConfig(width=width, model=model or {"n_layer": 1, "base_width": 16},
                       train=train).model_dump(mode="json")


def test_a_factory_models_parameters_memory_and_flops_are_not_estimated():
    # before: the S4D formula's 39.6k parameters at width 64 (the model has 135.8k), 112k at
    # 128 (468k), with their memory and FLOPs, as if they were the model's
    text = cost_table([config(w, FACTORY) for w in (64, 128)], gpu=None)
    rows = {line.split()[0]: line.split() for line in text.splitlines()[2:4]}
    assert rows["64"][1:3] == ["?", "?"] and rows["128"][5] == "?"
    assert "39.6k" not in text and "not estimated for model examples.tiny_gpt:tiny_gpt" in text


def test_a_factory_model_gets_no_automatic_gpu_share_from_another_models_estimate():
    with pytest.raises(UserError, match="examples.tiny_gpt:tiny_gpt.*gpus_per_trial as a number"):
        estimate_config(config(64, FACTORY, device="cuda"))


def test_a_built_in_model_is_still_estimated_beside_a_factory():
    text = cost_table([config(64, FACTORY), config(64 * 2)], gpu=None)
    row_128 = next(line.split() for line in text.splitlines() if line.split()[0] == "128")
    assert "?" not in row_128


def test_mfu_alone_gives_gpu_hours_on_the_default_gpu():
    # before: --mfu 0.3 on a CPU sweep printed no GPU-hours and said nothing of it
    text = cost_table([config()], gpu=None, mfu=0.3)
    assert "H100 GPU-h" in text and "30% of the H100" in text


def test_a_unigram_tokenizer_file_has_its_vocabulary(tmp_path):
    # a Unigram model's vocab is a list of [piece, score]: before, AttributeError traceback
    doc = {"model": {"type": "Unigram", "vocab": [["</s>", 0.0], ["a", -1.0], ["b", -2.0]]},
           "added_tokens": [{"id": 0, "content": "</s>", "special": True}]}
    path = tmp_path / "unigram.json"
    path.write_text(json.dumps(doc))
    assert _json_vocab(path) == 3


def test_a_json_file_that_is_not_a_tokenizer_is_one_line(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(UserError, match="not a tokenizers JSON file"):
        _json_vocab(path)


def test_the_vocabulary_of_a_unigram_file_is_the_one_the_tokenizer_loads(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from mutransfer.data.tokenizers import make_tokenizer

    tok = tokenizers.Tokenizer(tokenizers.models.Unigram())
    trainer = tokenizers.trainers.UnigramTrainer(vocab_size=60, special_tokens=["</s>"],
                                                 show_progress=False)
    tok.train_from_iterator(["some text to train on, " * 20, "and some more text"], trainer)
    path = tmp_path / "u.json"
    tok.save(str(path))
    assert _json_vocab(path) == make_tokenizer(str(path)).vocab_size


def saved_bytes(cfg: TrialConfig, vocab: int = 256) -> float:
    """Bytes of the tensors autograd saves in one training forward (weights excluded, every
    storage once): benchmarks/memory_estimate.py's measure."""
    from benchmarks.memory_estimate import measure_cpu_saved
    from mutransfer.data.base import DataSpec

    return measure_cpu_saved(cfg, DataSpec(kind="tokens", vocab_size=vocab, input_dim=None,
                                           output_dim=vocab, loss="ce"))


@pytest.mark.parametrize("d_state,batch,seq_len", [(64, 1, 512), (128, 1, 256), (16, 4, 128)])
def test_s4d_activation_memory_counts_the_kernels_powers(d_state, batch, seq_len):
    # the Vandermonde powers (H, N/2, L) complex64 per layer were left out: at d_state 64,
    # batch 1, L 512 the estimate was 3.9x below what autograd keeps
    from mutransfer.cost.model import Shape, estimate

    cfg = TrialConfig(width=64, model={"arch": "s4d", "n_layer": 2, "d_state": d_state,
                                       "base_width": 16},
                      train={"batch_size": batch, "seq_len": seq_len})
    est = estimate(Shape.of(cfg.model_dump(mode="json"), 256), "cpu").activation_bytes
    assert 0.7 <= saved_bytes(cfg) / est <= 1.3
