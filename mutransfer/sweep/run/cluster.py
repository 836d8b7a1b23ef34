"""Connecting to Ray: a local instance for the run, or an existing cluster by address.

Ray stays quiet: the sweep prints its own progress line, so Ray's banners, trial tables and
worker output are switched off (worker output remains in Ray's session logs).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mutransfer.errors import UserError, first_line
from mutransfer.paths import nearest_existing
from mutransfer.results.fs import is_uri, local_folder

# Set before Ray is imported (unless already set): no Tune trial tables or CSV/JSON/TensorBoard
# trial logs (the store is the record), no usage-stats banner.
QUIET_ENV = {
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "1000000",
}


def quiet_ray_env() -> None:
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    # always: trainables keep the driver's working directory (relative data paths need it)
    os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"


@dataclass
class Capacity:
    """The largest CPU and GPU amounts and memory any one alive node offers, and how many
    nodes."""

    cpus: float
    gpus: float
    nodes: int
    memory: float | None = None  # bytes: Ray's `memory` and object store of the node

    @property
    def largest(self) -> str:
        """How a refusal names the node a trial is held to."""
        return f"the largest of the cluster's {self.nodes} node(s)"


def is_remote_address(address: str | None) -> bool:
    """An address that may put workers on other machines: anything but a local Ray this
    process starts. A cluster reached at localhost (a driver run on the head) has the
    worker nodes that joined it, wherever they are."""
    return address not in (None, "local")


def is_relative_path(storage: str) -> bool:
    """A local path relative to the working directory (not a URI, not absolute, not ~)."""
    return not is_uri(storage) and not os.path.isabs(os.path.expanduser(storage))


def check_storage_reachable(storage: str, address: str | None) -> None:
    """A relative local path with `--address auto`, i.e. a driver on the cluster (a Ray job
    runs in a copy of the working directory, gone when it ends): refused in one line. With a
    driver here (`--address HOST:6379`) a relative path is this machine's folder (the store
    makes it absolute), which every node must then see (check_nodes_see, once connected)."""
    if address == "auto" and is_relative_path(storage):
        raise UserError(f"storage {storage!r} is a relative local path; with --address auto "
                        f"storage must be a path every node can reach (an absolute shared path "
                        f"or a URI such as s3://bucket/results); `mutransfer submit` resolves a "
                        f"relative one to the submitting machine's folder")


@contextmanager
def marker_in(location: str) -> Iterator[Path]:
    """A uniquely named empty file in `location`'s nearest existing folder (none is created),
    removed on leaving: what another machine looks for to tell whether it sees that folder.
    One-line UserError when it cannot be written."""
    folder = nearest_existing(Path(location).expanduser().absolute())
    marker = folder / f".mutransfer-shared-{uuid.uuid4().hex}"
    try:
        marker.touch()
    except OSError as exc:
        raise UserError(f"storage {location}: cannot write in {folder} "
                        f"({exc.strerror or exc})") from None
    try:
        yield marker
    finally:
        marker.unlink(missing_ok=True)


NODE_CHECK_S = 60.0  # how long the nodes may take to say whether they see the storage


def check_nodes_see(location: str) -> None:
    """On a cluster, every alive node sees the storage's folder: a zero-CPU task pinned to each
    node looks for a marker written here. A node that does not see it would write its trials'
    results where this driver never reads them: refused in one line, before any trial, naming
    the nodes. A bucket's URI is not checked (each node reaches it with its own credentials);
    a file:// URI is a folder on each node's own disk like a plain path, and is."""
    folder = local_folder(location)
    if folder is None:
        return
    import ray  # connected already (ray_session); Ray loads only where a run needs it
    from ray.exceptions import GetTimeoutError, RayError
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    exists = ray.remote(num_cpus=0)(os.path.exists)
    seen: list[bool] = []
    with marker_in(folder) as marker:
        refs = [exists.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote(str(marker)) for n in nodes]
        deadline = time.monotonic() + NODE_CHECK_S
        for ref in refs:
            try:
                seen.append(bool(ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))))
            except GetTimeoutError:
                raise UserError(f"storage {location}: the cluster's nodes did not say within "
                                f"{NODE_CHECK_S:.0f} s whether they see it") from None
            except RayError:  # the node left since it was listed: it runs no trial
                seen.append(True)
    blind = [str(n.get("NodeManagerAddress", n["NodeID"])) for n, ok in zip(nodes, seen) if not ok]
    if blind:
        raise UserError(f"storage {location}: {len(blind)} of the cluster's {len(nodes)} nodes "
                        f"do not see this folder ({', '.join(blind[:3])}"
                        f"{', ...' if len(blind) > 3 else ''}), so their trials' results would "
                        f"never reach it; give a folder every node mounts at the same path, or "
                        f"a URI")


def host_port(address: str) -> tuple[str, int | None]:
    """(host, port) of HOST:PORT, ray://HOST:PORT or [IPv6]:PORT (port None when absent)."""
    text = re.sub(r"^[a-z]+://", "", address).rstrip("/")
    host, _, port = text.rpartition(":")
    if not host:
        return text, None
    return host.strip("[]"), int(port) if port.isdigit() else None


def host_problem(host: str) -> str | None:
    """Why a host name cannot be looked up at all: the name lookup encodes it to IDNA, which
    refuses an empty label (a..b, .) and one of more than 63 characters, raising a
    UnicodeError that no connection error handler expects; None when it can."""
    try:
        host.encode("idna")
    except UnicodeError:
        return (f"{host!r} is not a host name: each of its labels (the parts between dots) is "
                "1 to 63 characters")
    return None


def probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast with one line when nothing listens at host:port (Ray would retry for long)."""
    if address == "auto":
        return
    if address.startswith(("http://", "https://")):
        raise UserError(f"--address {address}: that is a dashboard (Jobs API) address; use "
                        f"`mutransfer submit` with it, or give the cluster's GCS address "
                        f"(HOST:6379) to run the driver here")
    host, port = host_port(address)
    if port is None:
        raise UserError(f"--address {address}: expected HOST:PORT, ray://HOST:PORT or auto")
    problem = host_problem(host)
    if problem:
        raise UserError(f"--address {address}: {problem}")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise UserError(f"--address {address}: cannot reach a Ray cluster there "
                        f"({exc.strerror or exc})") from None


@contextmanager
def ray_session(address: str | None = None, num_cpus: int | None = None,
                num_gpus: int | None = None) -> Iterator[Capacity]:
    """Ray for the duration of a run: the one already initialised in this process (left
    running; options it cannot honour are refused), a new local instance (address None), or
    an existing cluster (`address`). The process that called it (a notebook's) gets back its
    signal handlers, environment and Ray's logging levels as they were (`process_state_kept`)."""
    with process_state_kept():
        quiet_ray_env()
        import ray

        with logger_levels_kept(RAY_LOGGERS), _session(ray, address, num_cpus, num_gpus) as cap:
            yield cap


@contextmanager
def _session(ray, address: str | None, num_cpus: int | None,
             num_gpus: int | None) -> Iterator[Capacity]:
    owned = not ray.is_initialized()
    if owned:
        try:
            _init(ray, address, num_cpus, num_gpus)
        except BaseException:
            ray.shutdown()  # a half-started local Ray must not outlive the error in this process
            raise
    else:
        check_running(ray, address, num_cpus, num_gpus)
    logging.getLogger("ray").setLevel(logging.ERROR)
    logging.getLogger("ray.tune").setLevel(logging.CRITICAL)  # failures: printed by the sweep
    try:
        with terminate_as_interrupt():
            yield capacity(ray)
    finally:
        if owned:
            ray.shutdown()


# What a run changes in the process that called it and Ray or Tune do not put back: Tune's
# SIGINT (and SIGUSR1) handler stays installed after the Tuner ends, so the caller's next
# Ctrl-C was swallowed (it only set an event no one reads); ray.init's SIGTERM handler
# (sys.exit) stays after ray.shutdown; ray.init points PYTHONBREAKPOINT at Ray's debugger (a
# breakpoint() in the notebook then waited for a debugpy client, or without debugpy did
# nothing); the sweep's quiet settings (QUIET_ENV, the Ray loggers at ERROR) silenced the
# caller's own later use of Ray.
KEPT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1")
                     if hasattr(signal, name))
RAY_LOGGERS = ("ray", "ray.tune")


@contextmanager
def process_state_kept() -> Iterator[None]:
    """The signal handlers (main thread only: no other may set them) and environment variables
    of this process, put back as they were on leaving."""
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {sig: signal.getsignal(sig) for sig in KEPT_SIGNALS}
    env = dict(os.environ)
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            if handler is not None:  # None: set outside Python, which cannot set it back
                signal.signal(sig, handler)
        restore_environ(env)


def restore_environ(env: dict[str, str]) -> None:
    """os.environ as `env`: variables set since removed, changed ones set back."""
    for key in set(os.environ) - set(env):
        del os.environ[key]
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


@contextmanager
def logger_levels_kept(names: tuple[str, ...]) -> Iterator[None]:
    """The levels of the loggers `names`, set back on leaving."""
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a batch system's time limit, `kill`) stops the run as Ctrl-C does: through
    the SIGINT handler of the moment (Tune's, which ends the trials and keeps what finished;
    else Python's KeyboardInterrupt), so the sweep says how far it got and releases its
    lease. Before, Ray's own handler printed a C++ stack dump and aborted the driver (exit
    134). Installed after Ray started (it sets its own at init), in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_terminate(signum: int, frame) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # SIG_IGN or SIG_DFL set by someone else
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    before = signal.signal(signal.SIGTERM, on_terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def check_running(ray, address: str | None, num_cpus: int | None,
                  num_gpus: int | None) -> None:
    """Options for a run on the Ray this process already has: refused in one line when that
    Ray cannot be what they ask for (another address, other CPU or GPU amounts), since the run
    would otherwise go to it silently. Options left out accept it as it is."""
    if address not in (None, "local", "auto") and not address.startswith("ray://"):
        running = ray.get_runtime_context().gcs_address  # a client's (ray://) port is not it
        if _same_place(address, running) is False:
            raise UserError(f"--address {address}: this process already runs Ray (at "
                            f"{running}); end it (ray.shutdown()) to connect elsewhere")
    have = ray.cluster_resources()
    for flag, asked, kind in (("--num-cpus", num_cpus, "CPU"), ("--num-gpus", num_gpus, "GPU")):
        if asked is not None and abs(have.get(kind, 0.0) - asked) > 1e-9:
            raise UserError(f"{flag} {asked}: this process already runs a Ray with "
                            f"{have.get(kind, 0.0):g} {kind}s; end it (ray.shutdown()) for "
                            f"another amount")


def _same_place(a: str, b: str) -> bool | None:
    """Whether two HOST:PORT addresses name one place (hosts compared by their IPv4 address,
    this machine's loopback and its own addresses as one: Ray reports a local cluster at the
    node's address, e.g. 192.0.2.2:6379, which a notebook reached as 127.0.0.1:6379 and was
    refused as another cluster); None when either cannot be read."""
    (host_a, port_a), (host_b, port_b) = host_port(a), host_port(b)
    if port_a is None or port_b is None:
        return None
    ip_a, ip_b = _ip(host_a), _ip(host_b)
    return port_a == port_b and (ip_a == ip_b or (_is_here(ip_a) and _is_here(ip_b)))


def _is_here(ip: str) -> bool:
    """Whether an address is this machine's: loopback, or one of its own addresses."""
    return ip.startswith("127.") or ip == "::1" or ip in _own_addresses()


@functools.cache
def _own_addresses() -> frozenset[str]:
    """This machine's addresses: its host name's, and the one it reaches other hosts from
    (what Ray reports as the node's IP; a UDP socket's connect sends nothing)."""
    own: set[str] = set()
    try:
        own.update(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed to anyone
            own.add(probe.getsockname()[0])
    except OSError:
        pass
    return frozenset(own)


def _ip(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def check_local_resources(address: str | None, num_cpus: int | None,
                          num_gpus: int | None) -> None:
    """--num-cpus/--num-gpus: amounts for a local Ray only (checked before anything is written)."""
    if (num_cpus is not None or num_gpus is not None) and address not in (None, "local"):
        raise UserError("--num-cpus/--num-gpus set the resources of a local Ray; a cluster "
                        "has its own")
    if num_cpus is not None and num_cpus < 1:
        raise UserError(f"--num-cpus {num_cpus}: give at least 1 CPU")
    if num_gpus is not None and num_gpus < 0:
        raise UserError(f"--num-gpus {num_gpus}: give 0 or more GPUs")


def refresh_ray_auth() -> None:
    """Ray caches its authentication mode and token per process: re-read both from the
    environment (RAY_AUTH_MODE, RAY_AUTH_TOKEN) and ~/.ray/auth_token, which may have changed
    since Ray first looked (a stale token makes a new local Ray refuse its own driver, a stale
    mode makes a client send no token). Only while this process has no Ray running."""
    import ray

    if ray.is_initialized():
        return
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # a Ray without token authentication
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def enable_token_auth() -> bool:
    """Switch Ray's client to token authentication when a local token exists (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), as `ray job submit` does: a cluster started
    with tokens (the default of Ray >= 2.52) then accepts this client without
    RAY_AUTH_MODE=token being set too. False when there is no token (or no such Ray)."""
    try:  # Ray's own helper (private; absent in other versions: then no token support)
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return False
    logger = logging.getLogger("ray")
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "token authentication is enabled" warning
    try:
        refresh_ray_auth()
        return bool(maybe_enable_token_auth_if_token_available(warn_if_disabled=False))
    finally:
        logger.setLevel(level)


TOKEN_HINT = ("if the cluster uses token authentication, set RAY_AUTH_TOKEN to its token "
              "(`ray get-auth-token` on the head)")


def _init(ray, address: str | None, num_cpus: int | None, num_gpus: int | None) -> None:
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    check_local_resources(address, num_cpus, num_gpus)
    refresh_ray_auth()
    if address is None or address == "local":
        ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus,
                 include_dashboard=False, **quiet)
        return
    probe(address)
    has_token = enable_token_auth()
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        hint = "" if has_token else f"; {TOKEN_HINT}"
        raise UserError(f"--address {address}: cannot connect to Ray "
                        f"({first_line(exc)}){hint}") from None


def capacity(ray) -> Capacity:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = max((n["Resources"].get("CPU", 0.0) for n in nodes), default=0.0)
    gpus = max((n["Resources"].get("GPU", 0.0) for n in nodes), default=0.0)
    # what Ray found free on a node when it started, split between its tasks' heap
    # (`memory`) and the object store: a trial's process can use no more than their sum
    memory = max((n["Resources"].get("memory", 0.0) + n["Resources"].get(
        "object_store_memory", 0.0) for n in nodes), default=0.0)
    return Capacity(cpus, gpus, len(nodes), memory or None)
