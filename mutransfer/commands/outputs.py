"""Checking where a command will write before it does any work: a run of minutes or hours must
not end in a crash that loses its result because `--out` named a folder that is not there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mutransfer.errors import UserError
from mutransfer.paths import folder_problem


def check_output_file(path: str | os.PathLike, option: str = "--out") -> None:
    """`path` can be written as a file: its folder exists and takes a new file, the path is
    not a folder, and the file itself opens for writing. Nothing is left behind."""
    if not os.fspath(path):  # Path("") is ".": the current folder, not what was meant
        raise UserError(f"{option} '': an empty file name")
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
    problem = folder_problem(folder)
    if problem:
        raise UserError(f"{option} {path}: {problem}")
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
    if not os.fspath(path):  # Path("") is ".": the current folder, not what was meant
        raise UserError(f"{option} '': an empty folder name")
    problem = folder_problem(Path(path).expanduser().absolute())
    if problem:
        raise UserError(f"{option} {path}: {problem}")


def write_result(path: str | os.PathLike, text: str, option: str = "--out") -> None:
    """Write a finished run's result to `path`; when that fails (a full disk, /dev/full: a
    target that took the open but refuses the bytes), save it in a new file in the current
    folder or the temp folder instead and say where, in one UserError line: the result of a
    run is never lost to its output file."""
    try:
        _write(Path(path).expanduser(), text)
        return
    except OSError as exc:
        reason = exc.strerror or str(exc)
    saved = _save_elsewhere(text)
    where = f"the result is saved in {saved}"
    if saved is None:  # no folder takes it: on stdout, still not lost
        print(text, flush=True)
        where = "the result is printed above"
    raise UserError(f"{option} {path}: cannot write the result ({reason}); {where}")


def _write(p: Path, text: str) -> None:
    """A regular file (or a new one) is replaced whole (a temp file beside it, renamed):
    a failure leaves the old content; anything else (a device, a FIFO) is written as it is,
    flushed and synced so that a refused write surfaces here."""
    if p.exists() and not p.is_file():
        with open(p, "w") as f:
            f.write(text)
            f.flush()
        return
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save_elsewhere(text: str) -> str | None:
    """A new file holding `text` in the current folder, else the temp folder; None when
    neither takes it."""
    for folder in (os.getcwd(), tempfile.gettempdir()):
        try:
            fd, name = tempfile.mkstemp(dir=folder, prefix="mutransfer-result-",
                                        suffix=".json")
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            return name
        except OSError:
            continue
    return None
