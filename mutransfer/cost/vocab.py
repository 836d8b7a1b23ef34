"""The vocabulary (and input/output sizes) a data config gives the model, without reading
the data: from its token cache when there is one, else from the tokenizer."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from mutransfer.data.config import DataConfig
from mutransfer.errors import UserError

# n_vocab of tiktoken's published encodings, for when the encoding file is not at hand (the
# estimate must not need the network); a loadable encoding is asked instead
TIKTOKEN_VOCAB = {"gpt2": 50257, "r50k_base": 50257, "p50k_base": 50281, "p50k_edit": 50284,
                  "cl100k_base": 100277, "o200k_base": 200019}


def data_sizes(data: dict[str, Any]) -> tuple[int | None, int | None, int]:
    """(vocab_size or None, input_dim or None, output_dim) of a data config."""
    cfg = DataConfig.model_validate(data)
    if cfg.source == "synthetic":
        if cfg.task == "copy":
            return cfg.n_symbols + 2, None, cfg.n_symbols + 2
        return None, 1, 1
    vocab = tokenizer_vocab(cfg.tokenizer)
    return vocab, None, vocab


@functools.lru_cache(maxsize=16)
def tokenizer_vocab(name: str) -> int:
    if name == "byte":
        return 256
    if name.endswith(".json"):
        return _json_vocab(Path(name).expanduser())
    # imported here, not at the top: data.tokenizers imports numpy and pyarrow, which the
    # sweep's plan (validate, --dry-run) needs only for a tokenizer other than byte or JSON
    from mutransfer.data.tokenizers import make_tokenizer

    try:
        return make_tokenizer(name).vocab_size
    except UserError:
        if name in TIKTOKEN_VOCAB:
            return TIKTOKEN_VOCAB[name]
        raise


def _json_vocab(path: Path) -> int:
    """The model's vocabulary plus the added tokens, as tokenizers counts them: one more than
    the largest id. A BPE, WordPiece or WordLevel model's vocab maps tokens to ids; a
    Unigram model's is a list of [piece, score] pairs, the id of each its place in the list
    (before, a Unigram file stopped the cost table with an AttributeError traceback)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"tokenizer {path}: cannot read it ({exc})") from None
    model = doc.get("model") if isinstance(doc, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if isinstance(vocab, dict):
        ids = {i for i in vocab.values() if isinstance(i, int)}
    elif isinstance(vocab, list):
        ids = set(range(len(vocab)))
    else:
        raise UserError(f"tokenizer {path}: not a tokenizers JSON file (no model.vocab)")
    added = doc.get("added_tokens") or []
    ids |= {t.get("id") for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)}
    return max(ids) + 1 if ids else 0
