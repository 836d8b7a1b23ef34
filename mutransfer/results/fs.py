"""Storage locations (a local path or any URI pyarrow's filesystems accept: s3://, gs://, ...)
and the atomic writes into them that the store and the checkpoints share."""

from __future__ import annotations

import os
import re
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mutransfer.errors import UserError, first_line
from mutransfer.paths import nearest_existing

# the longest file name where the filesystem does not say (POSIX NAME_MAX on Linux)
DEFAULT_NAME_MAX = 255
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


class StorageUnreachable(UserError):
    """A storage location this machine cannot open (no network to its object store, no
    credentials for it, no client library): another machine, a cluster's node, may."""


def is_uri(location: str) -> bool:
    """True for `scheme://...` locations, False for plain (local) paths."""
    return bool(_SCHEME.match(str(location)))


def local_folder(location: str) -> str | None:
    """The path on this machine's (and each node's own) filesystem that a location names: a
    plain path as given, a `file://` URI's path; None for a URI of a shared store (s3://,
    gs://, ...). A `file://` store is as local as a plain path: on a cluster, each node
    writes into its own disk unless the path is a shared mount."""
    text = str(location)
    if not is_uri(text):
        return text
    if text[:7].lower() != "file://":
        return None
    try:
        return pafs.FileSystem.from_uri(text)[1]
    except (ValueError, OSError):  # refused with its reason where the store is opened
        return None


def absolute_location(location: str | Path) -> str:
    """A URI unchanged; a local path made absolute, so that Ray workers reach the same folder.
    UserError for a location holding a NUL byte (no filesystem takes one), a path through a
    symlink loop, or a name longer than its filesystem takes."""
    text = str(location)
    if "\0" in text:
        raise UserError(f"storage {text!r}: holds a NUL byte; give a path or URI without one")
    if is_uri(text):
        return text.rstrip("/")
    try:
        path = Path(text).expanduser().resolve()
    except RuntimeError:  # Python < 3.13 reports a loop so, 3.13 as OSError ELOOP
        raise UserError(f"storage {text}: a symlink loop; give a folder") from None
    except OSError as exc:
        raise UserError(f"storage {text}: cannot look at this path ({exc.strerror or exc})"
                        ) from None
    check_name_lengths(path, f"storage {text}")
    return str(path)


def check_name_lengths(path: Path, what: str) -> None:
    """UserError when a part of `path` is longer than the filesystem takes (the limit of the
    nearest existing folder, in bytes: 255 on ext4, xfs, tmpfs), before anything tries to
    make or list it (where Errno 36 would surface from deep inside pyarrow)."""
    try:
        limit = os.pathconf(nearest_existing(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = DEFAULT_NAME_MAX
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > limit:
            raise UserError(f"{what}: a name of {size} bytes ({part[:20]}...); this "
                            f"filesystem takes at most {limit}")


def resolve(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path inside it for a location (see `absolute_location`)."""
    text = absolute_location(location)
    if not is_uri(text):
        return pafs.LocalFileSystem(), text
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except ValueError as exc:  # pyarrow's ArrowInvalid: an unknown scheme, a malformed URI
        raise UserError(f"storage {text}: not a location pyarrow can open ({exc})") from None
    except OSError as exc:  # the bucket's region asked over a network this machine lacks
        raise StorageUnreachable(f"storage {text}: cannot open it from this machine "
                                 f"({first_line(exc)})") from None
    return fs, path.rstrip("/")


# How long a first look at a Google Cloud Storage location may take from this machine
# (seconds). pyarrow's GCS client retries for 15 minutes when it cannot get credentials or
# reach the service (its default, right for a running sweep's writes): `submit --storage
# gs://...` from a laptop without credentials sat silent that long before the job was sent.
FIRST_CONTACT_S = 15
_RETRY_QUERY = "retry_limit_seconds"  # pyarrow's GCS URI option for that limit


# locations found unreachable, with when: `submit` looks twice (its plan, then a live
# driver's lease), and should wait out the retries once
_UNREACHABLE: dict[str, tuple[float, str]] = {}
UNREACHABLE_KEPT_S = 60.0


def first_contact(location: str) -> None:
    """Look at `location` once, as the store will: StorageUnreachable (one line) when this
    machine cannot ask its filesystem, within FIRST_CONTACT_S for a GCS bucket (a URI that
    sets its own retry limit keeps it). Other filesystems answer a missing network or
    credentials at once; this machine's own folders are left to the store's checks."""
    key = text = absolute_location(location)
    scheme = text.split("://", 1)[0].lower() if is_uri(text) else "file"
    if scheme == "file":
        return
    seen = _UNREACHABLE.get(key)
    if seen is not None and time.monotonic() - seen[0] < UNREACHABLE_KEPT_S:
        raise StorageUnreachable(seen[1])
    if scheme in ("gs", "gcs") and _RETRY_QUERY not in text:
        text += ("&" if "?" in text else "?") + f"{_RETRY_QUERY}={FIRST_CONTACT_S}"
    fs, path = resolve(text)
    try:
        not_a_folder(fs, path)
    except OSError as exc:
        message = (f"storage {location}: cannot reach it from this machine "
                   f"({first_sentence(first_line(exc))})")
        _UNREACHABLE[key] = (time.monotonic(), message)
        raise StorageUnreachable(message) from None


def first_sentence(text: str, at_most: int = 200) -> str:
    """A client library's long message cut after its first sentence (GCS's runs to 900
    characters, its first sentence says what failed: no OAuth2 token, say)."""
    if len(text) <= at_most:
        return text
    end = text.find(". ")
    return text[:end + 1] if 0 < end < at_most else text[:at_most] + "..."


def not_a_folder(fs: pafs.FileSystem, path: str) -> str | None:
    """What `path` is when it exists and is not a folder ("a file", "a FIFO", ...); None for
    a folder or nothing there. StorageUnreachable when the filesystem cannot be asked from
    here: pyarrow reports some of these (Azure's missing credentials) as a bare
    ArrowException, no OSError, which would end the command in a traceback."""
    try:
        kind = fs.get_file_info(path).type
    except pa.ArrowException as exc:
        if isinstance(exc, OSError):
            raise
        raise StorageUnreachable(f"storage {path} ({fs.type_name}): cannot look at it from "
                                 f"this machine ({first_line(exc)})") from None
    if kind in (pafs.FileType.Directory, pafs.FileType.NotFound):
        return None
    if kind == pafs.FileType.File:
        return "a file"
    if isinstance(fs, pafs.LocalFileSystem):
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return "not a folder"
        for test, what in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                           (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
            if test(mode):
                return what
    return "not a folder"


def join(*parts: str) -> str:
    """Join path parts with `/` (pyarrow filesystems use `/` on every platform)."""
    return "/".join(p.rstrip("/") for p in parts if p)


def write_part_atomic(data: pd.DataFrame | pa.Table, target: str | Path,
                      filesystem: pafs.FileSystem | None = None) -> None:
    """Write a Parquet part to a temp file beside `target`, then rename it into place.

    Readers never see a half-written part: they skip dot-files, and the rename is atomic on
    local filesystems (object stores publish a whole object at once anyway). The temp name is
    unique so two writers of the same part cannot interleave bytes. The store writes Arrow
    tables of its schema; a DataFrame is written with the types pandas gives it.
    """
    fs = filesystem or pafs.LocalFileSystem()
    target = str(Path(target).resolve()) if filesystem is None else str(target)
    table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(data,
                                                                         preserve_index=False)
    write_atomic(fs, target, lambda out: pq.write_table(table, out))


def write_atomic(fs: pafs.FileSystem, target: str, write: Callable[[Any], None]) -> None:
    """`write(stream)` into a unique dot-file beside `target`, then rename it into place; the
    temp file is removed when anything fails."""
    folder, name = target.rsplit("/", 1)
    fs.create_dir(folder, recursive=True)
    tmp = join(folder, f".{name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with fs.open_output_stream(tmp) as out:
            write(out)
        fs.move(tmp, target)
    except BaseException:
        delete_quietly(fs, tmp)
        raise


def delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except OSError:
        pass
