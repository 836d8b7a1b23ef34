"""Checking where a command will write before it does any work: a run of minutes or hours must
not end in a crash that loses its result because `--out` named a folder that is not there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mutransfer.errors import UserError


def check_output_file(path: str | os.PathLike, option: str = "--out") -> None:
    """`path` can be written as a file: its folder exists and takes a new file, the path is
    not a folder, and the file itself opens for writing. Nothing is left behind."""
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise UserError(f"{option} {path}: is a folder; give a file name")
        folder = p.parent
        if not folder.is_dir():
            raise UserError(f"{option} {path}: folder {folder} does not exist")
    except OSError as exc:  # e.g. a name too long to look at
        raise UserError(f"{option} {path}: cannot write this file "
                        f"({exc.strerror or exc})") from None
    _probe(folder, option, path)
    _probe_file(p, option, path)


def _probe_file(p: Path, option: str, path: str | os.PathLike) -> None:
    """Open the file itself for appending (its folder taking files does not say that it can
    be written: a read-only file, a name too long, a link into a missing folder), then leave
    it as it was: unchanged, or gone again when this made it. Non-blocking: a FIFO with no
    reader is refused, not waited on."""
    target = Path(os.path.realpath(p))  # through a link: the file it names
    existed = target.exists()
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write this file "
                        f"({exc.strerror or exc})") from None
    os.close(fd)
    if not existed:
        target.unlink(missing_ok=True)


def check_output_dir(path: str | os.PathLike, option: str = "--out") -> None:
    """`path` can be made (or is) a folder that takes new files: the nearest part of it that
    exists is a folder and writable. Nothing is created."""
    p = Path(path).expanduser().absolute()
    existing = p
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == p else f"{existing} is a file, not a folder"
        raise UserError(f"{option} {path}: {what}")
    _probe(existing, option, path)


def _probe(folder: Path, option: str, path: str | os.PathLike) -> None:
    """Create and remove a temporary file in `folder` (permission bits do not tell for root,
    nor for a read-only mount)."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".mutransfer-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write in {folder} "
                        f"({exc.strerror or exc})") from None
