"""A tiny byte-level BPE, trained offline with the `tokenizers` package on some of the
standard library's files (the built-in corpus): a real tokenizers JSON file for tests."""

from __future__ import annotations

from pathlib import Path

EOT = "<|endoftext|>"


def train_bpe(path: Path, vocab_size: int = 320, n_files: int = 40) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from mutransfer.data.stdlib import stdlib_files

    texts = [f.read_text(errors="replace") for f in stdlib_files().files[:n_files]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.save(str(path))
    return path
