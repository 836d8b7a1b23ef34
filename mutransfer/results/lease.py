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
within a few seconds, as NTP keeps them).

What a killed driver had started outlives it: its local Ray's dashboard and runtime-env agents
for a minute or more, and trial workers that go on training and writing into the store. Ray
starts some of these in process groups of their own or re-parents them, so neither the
process tree nor the process group finds them all. The holder therefore puts its lease token
in its environment (LEASE_ENV), which every process it starts inherits; the driver that takes
over a stale lease on the same host ends every process that carries the dead holder's token.
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mutransfer.errors import UserError

LEASE = "driver.lease"
LEASE_ENV = "MUTRANSFER_DRIVER_LEASE"  # the holder's token, inherited by what it starts
HEARTBEAT_S = 10.0
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
    """This machine as a lease tells it: the kernel's boot id and this process's pid
    namespace. Two containers that share the host's name and kernel (host networking, e.g.
    Kubernetes hostNetwork pods) see different process lists: by boot id alone one judged the
    other's live driver dead by its pid, took its lease, and two drivers wrote one store."""
    parts = []
    for read in (lambda: Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                 lambda: os.readlink("/proc/self/ns/pid")):
        try:
            parts.append(read())
        except OSError:
            continue
    return " ".join(parts)


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
        self.taken_from: Holder | None = None  # the dead holder whose stale lease we took
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._env_before: str | None = None

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
            self.taken_from = other
        self._write()
        time.sleep(settle_s)
        winner = self.current()
        if winner is None or winner.token != self.holder.token:
            raise UserError(busy_message(self.store, winner or other or self.holder))
        self._env_before = os.environ.get(LEASE_ENV)
        os.environ[LEASE_ENV] = self.holder.token  # inherited by the Ray this driver starts
        self._thread = threading.Thread(target=self._beat, name="mutransfer-lease",
                                        daemon=True)
        self._thread.start()
        return ended

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            if self._env_before is None:
                os.environ.pop(LEASE_ENV, None)
            else:
                os.environ[LEASE_ENV] = self._env_before
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
        self.store.write_text(LEASE, json.dumps(asdict(self.holder), indent=1) + "\n")

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
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
    try:
        text = store.read_text(LEASE)
    except UnicodeDecodeError:  # damaged (a crash where renames are not atomic): as absent
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
        return Holder(**{k: data[k] for k in Holder.__dataclass_fields__})
    except (ValueError, TypeError, KeyError):
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


def takeover_message(holder: Holder, ended: list[int]) -> str:
    """The line a driver prints when it took over the lease of a driver that is gone (killed,
    or its host lost): who that was, and what it had left running that was ended."""
    left = (f"; ended {len(ended)} processes it had left running" if ended else "")
    return f"took over the store from a sweep driver that is gone ({holder.describe()}){left}"


def end_leftovers(holder: Holder) -> list[int]:
    """SIGKILL every process on this host that a dead holder had started (they carry its
    token in LEASE_ENV); the pids ended."""
    if holder.host != socket.gethostname() or holder.boot != _boot_id():
        return []
    mark = f"{LEASE_ENV}={holder.token}".encode()
    ended = []
    for pid in _pids():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        if mark in environ and pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except (ProcessLookupError, PermissionError):
                continue
    return ended


def _pids() -> list[int]:
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # no /proc (not Linux): nothing is found, nothing is ended
        return []
