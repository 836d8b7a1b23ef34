"""One sweep driver per store: a lease file in the store that says who holds it.

`driver.lease` (JSON) names the holding driver: host, pid, command, when it started, and a
heartbeat it rewrites every HEARTBEAT_S seconds. A second driver finds it and refuses in one
line. The lease needs nothing but writing, reading and deleting a small file, so it works the
same on a shared filesystem and on object storage (s3://, gs://). Taking it: write our lease,
wait SETTLE_S, read it back; of drivers that start at the same moment, the last writer wins
and the others read its token and refuse (a driver's read and its write are a few
milliseconds apart, far less than SETTLE_S).

A holder killed with SIGKILL leaves its lease behind. It is stale, and taken over, when its
holder is gone: on the same host (hostname and boot) when its process no longer exists, from
another host when its heartbeat is older than STALE_S (hosts' clocks are assumed to agree
within a few seconds, as NTP keeps them). A stale lease on the same host also names the
processes the dead driver had started (a local Ray: raylet, GCS, dashboard and runtime-env
agents, workers), which outlive it; the driver that takes over ends those still running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mutransfer.errors import UserError

LEASE = "driver.lease"
HEARTBEAT_S = 10.0
# every second at first: the processes a driver starts (its local Ray, which comes up after
# the lease is taken) are on record within a second of starting
EARLY_BEATS = 60
STALE_S = 60.0
# Between writing our lease and reading it back: longer than any other driver's read-then-write
# of the same file can take. A local or NFS path (close-to-open consistency) needs little;
# object storage a little more.
SETTLE_S = {"local": 0.2, "remote": 2.0}


@dataclass
class Holder:
    """What a lease file says."""

    token: str
    host: str
    boot: str  # the host's boot id: a container or a reboot is another host
    pid: int
    pid_start: str  # the process's start time (tells a reused pid apart)
    command: str
    started: float  # epoch seconds
    heartbeat: float
    processes: list[tuple[int, str]] = field(default_factory=list)  # (pid, start) it started

    def describe(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return (f"pid {self.pid} on {self.host}, started {start}, last heartbeat "
                f"{max(0, round(now - self.heartbeat))} s ago: {self.command}")


def _proc_start(pid: int) -> str:
    """A process's start time in clock ticks since boot ("" where /proc is not there)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int, start: str) -> bool:
    """The process exists and is the one that was recorded (not a later one with its pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    try:
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False  # killed, not yet reaped by its parent
    except OSError:
        pass
    return not start or _proc_start(pid) in ("", start)


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, start) of every process below `pid` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append((p, _proc_start(p)))
        todo += children.get(p, [])
    return [(p, s) for p, s in found if s]


class Lease:
    """The store's driver lease, held from `acquire` to `release` (or a `with` block)."""

    def __init__(self, store: Any, command: str | None = None):
        self.store = store
        now = time.time()
        self.holder = Holder(token=uuid.uuid4().hex, host=socket.gethostname(), boot=_boot_id(),
                             pid=os.getpid(), pid_start=_proc_start(os.getpid()),
                             command=command or " ".join(["mutransfer", *sys.argv[1:]]),
                             started=now, heartbeat=now)
        self.lost: Holder | None = None  # who took the lease from us (ours: it was removed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------------------
    def current(self) -> Holder | None:
        return read_holder(self.store)

    # -- taking and giving back ------------------------------------------------------------
    def acquire(self, settle_s: float | None = None) -> list[int]:
        """Take the lease or raise a UserError naming its holder. Returns the pids of a dead
        holder's leftover processes that were ended."""
        if settle_s is None:
            local = type(self.store.fs).__name__ == "LocalFileSystem"
            settle_s = SETTLE_S["local" if local else "remote"]
        ended = []
        other = self.current()
        if other is not None and other.token != self.holder.token:
            if is_live(other):
                raise UserError(busy_message(self.store, other))
            ended = end_leftovers(other)
        self._write()
        time.sleep(settle_s)
        winner = self.current()
        if winner is None or winner.token != self.holder.token:
            raise UserError(busy_message(self.store, winner or other or self.holder))
        self._thread = threading.Thread(target=self._beat, name="mutransfer-lease",
                                        daemon=True)
        self._thread.start()
        return ended

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        current = self.current()
        if current is not None and current.token == self.holder.token:
            self.store.delete_text(LEASE)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- heartbeat -------------------------------------------------------------------------
    def _write(self) -> None:
        self.holder.heartbeat = time.time()
        self.holder.processes = descendants(os.getpid())
        self.store.write_text(LEASE, json.dumps(asdict(self.holder), indent=1) + "\n")

    def _beat(self) -> None:
        beats = 0
        while not self._stop.wait(1.0 if beats < EARLY_BEATS else HEARTBEAT_S):
            beats += 1
            try:
                current = self.current()
                if current is None or current.token != self.holder.token:
                    # removed (and maybe taken) by someone else, or the store was deleted:
                    # never overwrite another's lease, never recreate a removed folder
                    self.lost = current or self.holder
                    return
                self._write()
            except OSError:  # storage briefly unreachable: try again at the next beat
                continue


def read_holder(store: Any) -> Holder | None:
    """The lease's holder as the file says, or None (no lease, or an unreadable one)."""
    text = store.read_text(LEASE)
    if not text:
        return None
    try:
        data = json.loads(text)
        data["processes"] = [tuple(p) for p in data.get("processes", [])]
        return Holder(**data)
    except (ValueError, TypeError):
        return None  # a half-written lease of an old holder: taken as absent


def is_live(holder: Holder, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    if holder.host == socket.gethostname() and holder.boot == _boot_id():
        return _alive(holder.pid, holder.pid_start)
    return now - holder.heartbeat < STALE_S


def live_holder(store: Any) -> Holder | None:
    holder = read_holder(store)
    return holder if holder is not None and is_live(holder) else None


def busy_message(store: Any, holder: Holder) -> str:
    """The one line a second driver prints."""
    return (f"storage {store.location} is in use by another sweep driver "
            f"({holder.describe()}); one driver per store: wait for it to end, or stop it")


def end_leftovers(holder: Holder) -> list[int]:
    """SIGKILL what a dead holder on this host had started and left running."""
    if holder.host != socket.gethostname() or holder.boot != _boot_id():
        return []
    ended = []
    for pid, start in holder.processes:
        if pid != os.getpid() and _alive(pid, start) and start:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except (ProcessLookupError, PermissionError):
                continue
    return ended
