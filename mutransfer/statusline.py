"""One status line for long work (a sweep, a trial, a coordinate check): on a terminal it is
redrawn in place, with messages printed above it; elsewhere (a log file, a Ray job's logs)
each drawing is a line of its own. The callers decide what the line says and how often."""

from __future__ import annotations

import sys
from typing import Any, TextIO

CLEAR = "\r\033[K"  # to the start of the line, and erase it


def human(n: int) -> str:
    """12345678 -> '12.3M': sizes for one-line descriptions."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


class StatusLine:
    def __init__(self, out: TextIO | None = None, tty: bool | None = None):
        self.out = out or sys.stdout
        self.tty = _is_tty(self.out) if tty is None else tty
        self.drawn = False  # a line is on screen, not ended (terminal only)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles what holds this (its callbacks, its searcher): an open stream cannot
        be pickled, and a copy has nothing to write to anyway."""
        return {**self.__dict__, "out": None}

    def _flush(self) -> None:
        """Flush where the stream can (`run(out=...)` takes any object with a `write`)."""
        flush = getattr(self.out, "flush", None)
        if callable(flush):
            flush()

    def draw(self, line: str) -> None:
        if self.out is None:
            return
        if self.tty:
            self.out.write(CLEAR + line)
            self.drawn = True
        else:
            self.out.write(line + "\n")
        self._flush()

    def message(self, text: str) -> None:
        """A line of its own; on a terminal the status line is erased first (redraw it)."""
        if self.out is None:
            return
        if self.drawn:
            self.out.write(CLEAR)
            self.drawn = False
        self.out.write(text + "\n")
        self._flush()

    def close(self) -> None:
        """End the status line on a terminal (what is printed next starts on a new line)."""
        if self.drawn and self.out is not None:
            self.out.write("\n")
            self._flush()
        self.drawn = False


def _is_tty(out: Any) -> bool:
    """A terminal? A stream with only a `write` (a notebook's or a logger's writer, which
    `mutransfer.run(out=...)` takes) is not one: before, its missing `isatty` crashed the run
    after Ray had started."""
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False
