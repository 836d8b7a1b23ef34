"""The embedded default corpus: the Python standard library's own `.py` files, offline.

Files: every `.py` under sysconfig's stdlib path of the running interpreter, except installed
packages (site-packages, dist-packages) and test suites (folders named test, tests, idle_test):
about 12 MB on CPython 3.11 (the test suites alone would add 19 MB of generated-looking code).
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


def stdlib_files() -> FileSet:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)  # prune: never enter them
        files.extend(Path(folder) / n for n in names if n.endswith(".py"))
    if not files:
        raise UserError(f"stdlib: no .py files under {root} (is the standard library installed?)")
    return FileSet(root=root, files=tuple(sorted(files)))


@functools.lru_cache(maxsize=2)
def _cached(tokenizer: str, eval_fraction: float, split_seed: int) -> MemorySource:
    return corpus_from_files("stdlib", stdlib_files(), make_tokenizer(tokenizer), eval_fraction,
                             split_seed)


def load_stdlib(cfg: DataConfig) -> MemorySource:
    return _cached(cfg.tokenizer, cfg.eval_fraction, cfg.split_seed)
