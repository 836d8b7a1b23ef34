"""Local paths before anything is made: where a new file or folder would be created."""

from __future__ import annotations

import os
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
