"""Storage locations: a local path or any URI pyarrow's filesystems accept (s3://, gs://, ...)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.fs as pafs

from mutransfer.errors import UserError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_uri(location: str) -> bool:
    """True for `scheme://...` locations, False for plain (local) paths."""
    return bool(_SCHEME.match(str(location)))


def absolute_location(location: str | Path) -> str:
    """A URI unchanged; a local path made absolute, so that Ray workers reach the same folder."""
    text = str(location)
    if is_uri(text):
        return text.rstrip("/")
    return str(Path(text).expanduser().resolve())


def resolve(location: str | Path) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path inside it for a location (see `absolute_location`)."""
    text = absolute_location(location)
    if not is_uri(text):
        return pafs.LocalFileSystem(), text
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise UserError(f"storage {text}: not a location pyarrow can open ({exc})") from None
    return fs, path.rstrip("/")


def join(*parts: str) -> str:
    """Join path parts with `/` (pyarrow filesystems use `/` on every platform)."""
    return "/".join(p.rstrip("/") for p in parts if p)
