"""Local paths before anything is made: where a new file or folder would be created."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def nearest_existing(path: Path) -> Path:
    """`path`, or the nearest folder above it that exists (what a new file there would be
    made in, or refused by)."""
    while not os.path.exists(path) and path != path.parent:  # False on any error
        path = path.parent
    return path


def missing_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first: the folders a
    `mkdir -p` of it would make (up to `nearest_existing`)."""
    top, missing = nearest_existing(path), []
    while path != top:
        missing.append(path)
        path = path.parent
    return missing


def folder_problem(path: Path) -> str | None:
    """Why `path` cannot be made (or is not) a folder that takes new files, or None: the
    nearest part of it that exists must be a folder a file can be created in (tried with a
    temporary file: permission bits do not tell for root, nor for a read-only mount).
    Nothing is left behind."""
    existing = nearest_existing(path)
    if not existing.is_dir():
        return "is a file" if existing == path else f"{existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".mutransfer-probe-"):
            pass
    except OSError as exc:
        return f"cannot write in {existing} ({exc.strerror or exc})"
    return None
