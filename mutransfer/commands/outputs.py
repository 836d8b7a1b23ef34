"""Checking where a command will write before it does any work: a run of minutes or hours must
not end in a crash that loses its result because `--out` named a folder that is not there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from mutransfer.errors import UserError
from mutransfer.paths import folder_problem
from mutransfer.results.fs import local_folder
from mutransfer.results.store import RUNNING, Store

# a results store's folders whose every Parquet file is read as a row of the sweep
TABLE_FOLDERS = ("trials", "steps", RUNNING)


def check_output_file(path: str | os.PathLike, option: str = "--out") -> None:
    """`path` can be written as a file: its folder exists and takes a new file, the path is
    not a folder, and the file itself opens for writing. Nothing is left behind."""
    if not os.fspath(path):  # Path("") is ".": the current folder, not what was meant
        raise UserError(f"{option} '': an empty file name")
    if os.fspath(path).endswith(("/", os.sep)):  # Path drops the slash: a file `x` was written
        raise UserError(f"{option} {path}: ends in /, a folder's name; give a file name")
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


def local_output_dir(out: str, option: str = "--out",
                     store: str | os.PathLike | None = None) -> Path:
    """The folder a command writes its files into, checked before any work and as this
    machine's filesystem names it: `~` expanded, a file:// URI's path (s3://, gs://: refused,
    the files are written with this machine's open()), a folder that can be made or takes new
    files, not inside a results store's tables. Before, `coord-check --out` wrote into a
    store's trials/ (read as a row of the sweep ever after), and `--out file:///x` made a
    folder ./file:/x, then ended in a traceback after the measurements. `store`: the
    results folder a command reads, whose tables are refused even without its marker."""
    folder = local_folder(out)
    if folder is None:
        raise UserError(f"{option} {out}: not a local folder; give a folder on this machine")
    check_output_dir(folder, option)
    check_outside_store_tables(folder, option, store)
    return Path(folder).expanduser()


def check_outside_store_tables(path: str | os.PathLike, option: str = "--out",
                               store: str | os.PathLike | None = None) -> None:
    """Refuse a path inside a results store's tables (trials/, steps/ or running/ of any
    store, not only the one a command reads; `store`: a folder known to be one, e.g. the
    results folder analysed, marker or not): a file written there is read as a part of the
    sweep at every later read, skipped with a warning, or replaces one of its parts."""
    if not os.fspath(path):  # no path: refused by check_output_file/_dir as empty
        return
    known = _real(store) if store is not None else None
    target = _real(path)
    for folder in (target, *target.parents):
        if folder.name in TABLE_FOLDERS and (folder.parent == known or _is_store(folder.parent)):
            raise UserError(f"{option} {path}: inside the results folder's {folder.name}/ "
                            f"(of {folder.parent}), whose Parquet files are read as the "
                            f"sweep's rows; give a path outside it")


def check_not_an_input(path: str | os.PathLike, inputs: list[str],
                       option: str = "--out") -> None:
    """Refuse an output file that is one of the command's input files (the same file by
    another name or link too): the result would replace what it was computed from."""
    out = Path(path).expanduser()
    for name in inputs:
        try:
            same = out.exists() and os.path.samefile(out, Path(name).expanduser())
        except OSError:  # an input that is not there is refused where it is read
            same = False
        if same:
            raise UserError(f"{option} {path}: is the input file {name}; give another file "
                            f"name for the result")


def _real(path: str | os.PathLike) -> Path:
    """The absolute path with `~` expanded, `..` and links followed (what is written)."""
    return Path(os.path.realpath(Path(path).expanduser()))


def _is_store(folder: Path) -> bool:
    """A results store's root (Store.is_store: the marker, or trials/ and steps/)."""
    try:
        return Store(str(folder)).is_store()
    except (OSError, UserError):  # a folder that cannot be looked into is no store to write to
        return False


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
        os.fchmod(fd, _mode_of(p))  # mkstemp's is 0600: the result unreadable to the group
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_of(p: Path) -> int:
    """The permissions of the file written at `p`: those of the file it replaces, else what
    a new file gets by open() under this process's umask (read in passing: os has no getter)."""
    try:
        return p.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


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
