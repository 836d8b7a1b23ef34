"""Files named by a `path:` (a file, a directory or a glob) and their stable relative names."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from mutransfer.configbase import user_dir as data_dir  # noqa: F401  (the data's home)
from mutransfer.errors import DataMissing

_MAGIC = "*?["


@dataclass(frozen=True)
class FileSet:
    root: Path  # the names are relative to this: moving the folder keeps the split
    files: tuple[Path, ...]

    def keys(self) -> list[str]:
        return [f.relative_to(self.root).as_posix() for f in self.files]

    @property
    def where(self) -> Path:
        """What a message names: the one file, else the folder the files are under."""
        return self.files[0] if len(self.files) == 1 else self.root


def static_root(pattern: str) -> Path:
    """The folder part of a glob before its first wildcard."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if any(c in part for c in _MAGIC):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def visible(path: Path, root: Path) -> bool:
    """No part of `path` below `root` is a hidden (dot) name."""
    return not any(part.startswith(".") for part in path.relative_to(root).parts)


def resolve_files(path: str, source: str, suffix: str | None = None) -> FileSet:
    """Sorted regular files; a directory is searched recursively (hidden names skipped, and
    only `suffix` files when given). DataMissing naming the path when nothing is found."""
    p = os.path.expanduser(path)
    if any(c in p for c in _MAGIC):
        root = static_root(p)
        files = sorted(Path(m) for m in glob.glob(p, recursive=True) if Path(m).is_file())
    elif os.path.isdir(p):
        root = Path(p)
        files = sorted(f for f in root.rglob("*") if f.is_file() and visible(f, root)
                       and (suffix is None or f.name.endswith(suffix)))
    elif os.path.isfile(p):
        root = Path(p).parent
        files = [Path(p)]
    else:
        raise DataMissing(f"{source}: {path}: no such file or directory")
    if not files:
        what = f"no {suffix} files" if suffix else "no files"
        raise DataMissing(f"{source}: {what} match {path}")
    return FileSet(root=root, files=tuple(files))
