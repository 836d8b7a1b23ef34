"""Errors that reach the user as one line and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user: printed as one line by the CLI, exit code 2, nothing written."""


class DataMissing(UserError):
    """The data is not where the config says (no such file, nothing matches a glob): the one
    data error whose fix is to put the data there, which a sweep file's check adds as a hint
    (a file that is there but unreadable or malformed needs another fix)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def format_validation_error(exc: Exception, source: str | None = None) -> str:
    """One line naming the first offending field of a pydantic ValidationError."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc).splitlines()[0]
    errs = exc.errors()
    if not errs:
        return str(exc).splitlines()[0]
    first = errs[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if p != "__root__")
    msg = first.get("msg", "invalid value")
    prefix = f"{source}: " if source else ""
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    where = f"{loc}: " if loc else ""
    return f"{prefix}{where}{msg}{more}"
