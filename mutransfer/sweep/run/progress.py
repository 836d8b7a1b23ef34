"""The live progress line of a sweep: done / running / diverged / failed, elapsed and ETA.

On a terminal one line is redrawn in place (mutransfer/statusline.py); otherwise (a log file, a
Ray job's logs) a line is printed when something changed, at most every `every_s` seconds, and
at least every minute.
"""

from __future__ import annotations

import time
from typing import TextIO

from mutransfer.statusline import StatusLine


def fmt_duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    def __init__(self, total: int | None, out: TextIO | None = None, tty: bool | None = None,
                 every_s: float = 10.0, clock=time.monotonic):
        self.total = total  # None: not known up front (a search decides as it goes)
        self.expected = 0  # without a total: the trials known so far, shown as ~N
        self.status = StatusLine(out, tty)
        self.every_s = 0.5 if self.tty else every_s
        self.clock = clock
        self.start = clock()
        self.running = self.complete = self.diverged = self.failed = 0
        self.stopped = 0  # ended early by the search's stopping rule (search.stop)
        # found the store holding its result already (`skipped`): stored nothing this run
        self.skipped = 0
        self.max_running = 0
        self.durations: list[float] = []
        self._started: dict[str, float] = {}
        self._last_print = -1e9
        self._last_line = ""

    @property
    def out(self) -> TextIO | None:
        return self.status.out

    @property
    def tty(self) -> bool:
        return self.status.tty

    # -- events ------------------------------------------------------------------------------
    def started(self, key: str) -> None:
        if key not in self._started:
            self._started[key] = self.clock()
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        self.refresh()

    def finished(self, key: str, status: str) -> None:
        """status: complete, diverged, stopped (early, by the search's stopping rule), failed
        (a trial that ran out of retries) or skipped (its result was in the store already:
        this run stored nothing for it)."""
        begun = self._started.pop(key, None)
        if begun is not None:
            self.running -= 1
            if status != "failed":
                self.durations.append(self.clock() - begun)
        if status == "diverged":
            self.diverged += 1
        elif status == "stopped":
            self.stopped += 1
        elif status == "failed":
            self.failed += 1
        elif status == "skipped":
            self.skipped += 1
        else:
            self.complete += 1
        self.refresh()

    def retrying(self, key: str) -> None:
        """The trial failed and will run again: it stops counting as running until restarted."""
        if self._started.pop(key, None) is not None:
            self.running -= 1
        self.refresh()

    # -- text --------------------------------------------------------------------------------
    @property
    def finished_count(self) -> int:
        return self.complete + self.diverged + self.stopped + self.failed + self.skipped

    def eta_s(self) -> float | None:
        """Remaining trials x mean trial time / trials at once; None until one has finished."""
        if not self.durations:
            return None
        remaining = self.target - self.finished_count
        mean = sum(self.durations) / len(self.durations)
        at_once = max(1, self.max_running)
        # the running ones are part-way through: count them as half done
        return max(0.0, (remaining - 0.5 * self.running) * mean / at_once)

    @property
    def target(self) -> int:
        """The total, or the trials known so far (never fewer than started)."""
        if self.total is not None:
            return self.total
        return max(self.expected, self.finished_count + self.running)

    def line(self) -> str:
        eta = self.eta_s()
        total = str(self.total) if self.total is not None else f"~{self.target}"
        width = len(str(self.target))
        return (f"[{self.finished_count:>{width}}/{total}] done {self.complete}  "
                f"running {self.running}  diverged {self.diverged}  "
                f"{f'stopped {self.stopped}  ' if self.stopped else ''}failed {self.failed}  "
                f"{f'stored already {self.skipped}  ' if self.skipped else ''}"
                f"| elapsed {fmt_duration(self.clock() - self.start)}  "
                f"eta {fmt_duration(eta) if eta is not None else '?'}")

    def refresh(self, force: bool = False) -> None:
        now = self.clock()
        line = self.line()
        counts = line.split("|")[0]
        changed = counts != self._last_line.split("|")[0]
        due = now - self._last_print >= self.every_s
        if not (force or (due and (changed or self.tty)) or now - self._last_print >= 60):
            return
        self._emit(line)
        self._last_print = now

    def message(self, text: str) -> None:
        """A line of its own (a failure, a retry) above the progress line."""
        self.status.message(text)
        if self.tty:
            self._emit(self.line())

    def close(self) -> None:
        self._emit(self.line())
        self.status.close()

    def _emit(self, line: str) -> None:
        self.status.draw(line)
        self._last_line = line
