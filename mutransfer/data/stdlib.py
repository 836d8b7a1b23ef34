"""The embedded default corpus: the Python standard library's own `.py` files, offline.

Files: every `.py` under sysconfig's stdlib path of the running interpreter, except installed
packages (site-packages, dist-packages), test suites (folders named test, tests, idle_test)
and what the interpreter's build wrote (`_sysconfigdata_*.py`, which holds the build's folder
and compiler flags, and `config-*/python-config.py`): about 12 MB on CPython 3.11 (the test
suites alone would add 19 MB of generated-looking code). Without the build's files, two builds
of one CPython release (pyenv builds made at different times, a Docker image, ...) give the
same corpus, so the same batches: with them, a path differing by one byte moved every random
window of the train split (issue 23: two fresh clones on Python 3.11.7 did not reproduce the
README's quickstart figures). The corpus fingerprint (files, bytes, content hash) is in the
trials table's `corpus` column.
Split by file (a stable hash of the path relative to the stdlib folder), byte-level by
default. Read once per process and configuration (many trials share a Ray worker), about one
byte per token in memory.
"""

from __future__ import annotations

import functools
import os
import sysconfig
from pathlib import Path

from mutransfer.data.config import DataConfig
from mutransfer.data.files import FileSet
from mutransfer.data.memory import MemorySource
from mutransfer.data.text import corpus_from_files
from mutransfer.data.tokenizers import make_tokenizer
from mutransfer.errors import UserError

SKIP_DIRS = frozenset({"site-packages", "dist-packages", "test", "tests", "idle_test",
                       "__pycache__"})
BUILD_DIR_PREFIX = "config-"  # config-3.11-x86_64-linux-gnu/: the build's Makefile, scripts
BUILD_FILE_PREFIX = "_sysconfigdata"  # the build's paths and flags, as a module


def stdlib_files(root: Path | None = None) -> FileSet:
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS  # prune: never enter them
                         and not d.startswith(BUILD_DIR_PREFIX))
        files.extend(Path(folder) / n for n in names
                     if n.endswith(".py") and not n.startswith(BUILD_FILE_PREFIX))
    if not files:
        raise UserError(f"stdlib: no .py files under {root} (is the standard library installed?)")
    return FileSet(root=root, files=tuple(sorted(files)))


@functools.lru_cache(maxsize=2)
def _cached(tokenizer: str, eval_fraction: float, split_seed: int) -> MemorySource:
    return corpus_from_files("stdlib", stdlib_files(), make_tokenizer(tokenizer), eval_fraction,
                             split_seed)


def load_stdlib(cfg: DataConfig) -> MemorySource:
    return _cached(cfg.tokenizer, cfg.eval_fraction, cfg.split_seed)
