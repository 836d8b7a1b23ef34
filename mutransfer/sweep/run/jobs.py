"""Sweeps as Ray jobs: submit, status, logs, stop and the list of them, through Ray's Jobs API
(JobSubmissionClient).

The job runs `python -m mutransfer.cli sweep FILE --address auto --storage STORAGE` on the
cluster's head, with the project folder uploaded as its working directory; results go to the
sweep's storage, which must therefore be a location every node reaches: a URI, an absolute
shared path, or the sweep's relative storage (its default, results/NAME) read as the folder
of that name in the working directory *on this machine*, once the head is seen to reach it
(a filesystem this machine shares with the cluster: a shared home, or a cluster on this
machine), so that `mutransfer plot results/NAME` here reads what the cluster wrote.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mutransfer.data.files import resolve_files
from mutransfer.errors import DataMissing, UserError, first_line
from mutransfer.results.fs import StorageUnreachable, first_contact
from mutransfer.results.lease import busy_message, live_holder
from mutransfer.results.store import Store
from mutransfer.sweep.run.cluster import (
    enable_token_auth,
    host_problem,
    is_relative_path,
    marker_in,
    quiet_ray_env,
)

# Never uploaded: results, data, environments, caches (the job reads data where the
# cluster has it, and writes results to the sweep's storage).
EXCLUDES = ["results/", "data/", ".git/", ".venv/", "venv/", "**/__pycache__/", "*.parquet",
            ".pytest_cache/", ".ruff_cache/", "*.egg-info/", "build/", "dist/"]
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


DASHBOARD_PORT = 8265  # Ray's default for the dashboard and its Jobs API
_PORT = re.compile(r":\d+$")


def dashboard_address(address: str) -> str:
    """The Jobs API's URL, the one both the reachability probe and Ray's client use: a URL
    as given (its scheme in lower case; no port: the scheme's, as for any URL, e.g. an
    ingress on port 80), or `HOST[:PORT]` as http on port 8265 when it names none (Ray's
    client would otherwise go to port 80 while the probe had checked 8265)."""
    scheme, sep, rest = address.partition("://")
    if sep:
        return f"{scheme.lower()}://{rest}"
    netloc, slash, path = address.partition("/")
    port = "" if _PORT.search(netloc) else f":{DASHBOARD_PORT}"
    return f"http://{netloc}{port}{slash}{path}"


def client(address: str) -> Any:
    """A JobSubmissionClient connected to `address`, or a one-line UserError."""
    import logging

    quiet_ray_env()
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:  # pragma: no cover - ray is a dependency
        raise UserError(f"the Ray Jobs API is not available ({exc})") from None
    for name in ("ray", "ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk"):
        logging.getLogger(name).setLevel(logging.WARNING)  # no "creating a file package" lines
    url = dashboard_address(address)
    _probe_dashboard(address, url)
    try:
        return _connect(JobSubmissionClient, url)
    except RuntimeError as exc:
        if "ray[default]" in str(exc):
            raise UserError("submitting jobs needs Ray's HTTP client: pip install "
                            "'ray[default]'") from None
        raise UserError(f"dashboard {address}: {first_line(exc)}") from None
    except (ConnectionError, OSError, ValueError) as exc:
        raise UserError(f"dashboard {address}: cannot reach the Ray dashboard there "
                        f"({first_line(exc)})") from None


def _connect(client_cls: Any, url: str) -> Any:
    """Connect; a cluster with token authentication (the default of Ray >= 2.52 clusters)
    gets the local token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) on a
    second try, as `ray.init` would send it."""
    import ray.exceptions

    # Ray < 2.52 has no token authentication, and so no such error: nothing to retry
    AuthenticationError = getattr(ray.exceptions, "AuthenticationError", ())  # noqa: N806

    try:
        return client_cls(url)
    except AuthenticationError:
        if not enable_token_auth():
            raise UserError(f"{url}: the cluster requires an authentication token; set "
                            f"RAY_AUTH_TOKEN to the cluster's token (`ray get-auth-token` on "
                            f"the head)") from None
    try:
        return client_cls(url)
    except AuthenticationError:
        raise UserError(f"{url}: the cluster refused the authentication token; set "
                        f"RAY_AUTH_TOKEN to the cluster's token") from None


def _probe_dashboard(address: str, url: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens at the dashboard's host and port."""
    import socket
    from urllib.parse import urlsplit

    try:  # urlsplit itself refuses some (an unclosed IPv6 bracket)
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UserError(f"dashboard {address}: not a valid HOST:PORT") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # another scheme would have Ray's client import a Python module of that name
        raise UserError(f"dashboard {address}: expected http://HOST:{DASHBOARD_PORT}")
    problem = host_problem(parts.hostname)
    if problem:
        raise UserError(f"dashboard {address}: {problem}")
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        implied = "" if parts.port else (f"; no port given, so {port}, {parts.scheme}'s; the "
                                         f"dashboard's is {DASHBOARD_PORT}")
        raise UserError(f"dashboard {address}: cannot reach the Ray dashboard there "
                        f"({exc.strerror or exc}{implied})") from None


def entrypoint(sweep_file: str, storage: str | None, analysis: bool,
               max_cells: int | None = None) -> str:
    # `python -m`: works whether mutransfer is installed on the cluster or only uploaded
    args = ["python", "-m", "mutransfer.cli", "sweep", sweep_file, "--address", "auto"]
    if storage:
        args += ["--storage", storage]
    if max_cells is not None:
        args += ["--max-cells", str(max_cells)]
    if not analysis:
        args.append("--no-analysis")
    return " ".join(shlex.quote(a) for a in args)


def submit(path: str, address: str, working_dir: str | None = None, storage: str | None = None,
           analysis: bool = True, job_id: str | None = None, max_cells: int | None = None) -> str:
    """Validate the sweep here, then send it as a job; returns the job id. The job's driver
    takes the store's lease itself; a store that a driver holds already is refused here."""
    # the driver (the plan, the store, torch) is imported here, not at the top: `mutransfer
    # jobs` imports this module for a job's status and logs, which need none of it
    from mutransfer.sweep.run.driver import prepare

    # the data lives on the cluster
    plan = prepare(path, storage=storage, check_data=False, max_cells=max_cells)
    root = Path(working_dir or os.getcwd()).resolve()
    rel = _inside(Path(path).resolve(), root)
    check_uploaded(plan.data_configs(), root, plan.source)
    runtime_env = {"working_dir": str(root), "excludes": EXCLUDES}
    connect = functools.cache(lambda: client(address))  # asked first only about a relative storage
    location = shared_storage(plan.spec.storage_location, root, connect, address)
    _refuse_a_held_store(location)
    jobs = connect()
    try:
        return _submit_when_an_agent_is_up(
            jobs, entrypoint=entrypoint(rel, location, analysis, max_cells),
            runtime_env=runtime_env,
            submission_id=job_id, metadata={"sweep": plan.spec.name})
    except (RuntimeError, ValueError, OSError) as exc:
        raise UserError(f"submitting {path} to {address} failed: {first_line(exc)}") from None


# how long the head may take to run the one-line probe job (its agent's start-up is waited
# for apart, by _submit_when_an_agent_is_up)
PROBE_WAIT_S = 120.0


def shared_storage(location: str, root: Path, connect: Callable[[], Any], address: str) -> str:
    """Where the job writes its results. A URI or an absolute path as given (the user vouches
    that every node reaches it). A relative path, such as a sweep file's default
    results/NAME: the folder of that name in `root` as this machine sees it, provided the
    cluster's head sees it too, which a one-line probe job checks by looking for a marker file
    written here (removed after); else a one-line UserError, and nothing is left behind.
    `connect()` gives the Jobs API client (called only for a relative path)."""
    if not is_relative_path(location):
        return location
    target = (root / location).resolve()
    jobs = connect()
    with marker_in(str(target)) as marker:
        seen = _head_sees(jobs, marker)
    if seen is None:
        raise UserError(f"storage {location!r}: the cluster at {address} did not run the "
                        f"check that it reaches {target} within {PROBE_WAIT_S:.0f} s; give "
                        f"--storage a path every node reaches, or a URI")
    if not seen:
        raise UserError(f"storage {location!r} is relative: here it is {target}, which the "
                        f"cluster's head does not see (no filesystem shared with this "
                        f"machine); give --storage a path every node reaches, or a URI such as "
                        f"s3://bucket/results")
    print(f"storage: {target} (the sweep's {location!r}; the cluster's head sees it)",
          file=sys.stderr)
    return str(target)


def _head_sees(jobs: Any, path: Path) -> bool | None:
    """Whether a job on the cluster's head finds `path` (None: it did not end in time)."""
    check = "import os, sys; sys.exit(0 if os.path.exists(sys.argv[1]) else 3)"
    job_id = _submit_when_an_agent_is_up(
        jobs, entrypoint=f"python -c {shlex.quote(check)} {shlex.quote(str(path))}",
        metadata={"mutransfer": "storage check"})
    deadline = time.monotonic() + PROBE_WAIT_S
    while True:
        state = str(getattr(jobs.get_job_status(job_id), "value", ""))
        if state in TERMINAL:
            break
        if time.monotonic() > deadline:
            _quietly(jobs.stop_job, job_id)
            return None
        time.sleep(0.5)
    _quietly(jobs.delete_job, job_id)  # a check, not a job for the user's list
    return state == "SUCCEEDED"


def _quietly(fn, job_id: str) -> None:
    try:
        fn(job_id)
    except (RuntimeError, OSError, ValueError):
        pass


def _refuse_a_held_store(location: str) -> None:
    """Where this machine reaches the storage too (a shared path, a bucket), a live driver's
    lease there refuses the job before it is sent; elsewhere (a bucket only the cluster has
    the network or the credentials for) the job's driver checks, as said in one line."""
    try:
        first_contact(location)
        store = Store(location)
        store.check_is_store()
        holder = live_holder(store) if store.exists() else None
    except (OSError, StorageUnreachable) as exc:
        why = str(exc) if isinstance(exc, UserError) else f"storage {location}: {first_line(exc)}"
        print(f"{why}; the job's driver checks it on the cluster", file=sys.stderr)
        return
    if holder is not None:
        raise UserError(busy_message(store, holder))


# what Ray's dashboard answers while the head's job agent is still starting (a cluster just
# started): nothing was created, and it asks to try again
NO_AGENT_YET = "No available agent to submit job"


# how long to wait for it: a head on a busy 2-core machine took over 120 s (CI); a user's
# fresh cluster is up in seconds, so the wait costs nothing there
AGENT_WAIT_S = 600.0


def _submit_when_an_agent_is_up(jobs: Any, timeout_s: float = AGENT_WAIT_S, **job: Any) -> str:
    deadline, said = time.monotonic() + timeout_s, False
    while True:
        try:
            return jobs.submit_job(**job)
        except RuntimeError as exc:
            if NO_AGENT_YET not in str(exc) or time.monotonic() > deadline:
                raise
        if not said:  # one line, not one per retry
            print("waiting for the cluster's job agent to start ...", file=sys.stderr)
            said = True
        time.sleep(2.0)


def check_uploaded(data_configs: list[dict[str, Any]], root: Path, source: str) -> None:
    """The job reads a relative data path (or tokenizer file) in its copy of `root`, which
    holds only what was uploaded: one outside `root`, not there, or left out of the upload
    (EXCLUDES, a .gitignore or .rayignore) would fail the job on the cluster after it
    started; refused here in one line. Absolute paths are the cluster's to have."""
    rules = _UploadRules(root)  # its ignore files read once for every path
    for data in data_configs:
        for field in ("path", "tokenizer"):
            value = data.get(field)
            if not value or (field == "tokenizer" and not str(value).endswith(".json")):
                continue  # "byte", a tiktoken name: nothing to upload
            value = str(value)
            if not is_relative_path(value):
                continue
            why = _why_not_uploaded(value, rules)
            if why:
                raise UserError(f"{source}: data.{field} {value} is relative, so the job reads "
                                f"it in its uploaded copy of {root}, which lacks it ({why}); "
                                f"give the absolute path where every node has it")


def _why_not_uploaded(value: str, rules: _UploadRules) -> str | None:
    """Why the job's copy of `root` would lack the data at the relative `value` (a file, a
    folder or a glob): outside `root`, nothing there, or a file of it left out of the
    upload (`rules`, of the uploaded root). None: every file of it goes up."""
    root = rules.root
    where = Path(os.path.normpath(root / value))  # not resolve(): a symlink in root goes up
    if where != root and root not in where.parents:
        return f"{where} is outside it"
    files = _files_at(where)
    if not files:
        return f"there is nothing at {where} here to upload"
    return next((why for f in files if (why := rules.why(f))), None)


def _files_at(where: Path) -> tuple[Path, ...]:
    """The files the data layer reads at `where` (a file, a folder or a glob); none there."""
    try:
        return resolve_files(str(where), "data").files
    except DataMissing:
        return ()


class _UploadRules:
    """What Ray leaves out of an uploaded working directory, as Ray decides it: a path is
    out when it or a folder above it matches EXCLUDES (relative to the root) or a
    .rayignore or .gitignore (unless RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1) of a folder above
    it (relative to that folder), with Ray's own gitignore-style matcher."""

    def __init__(self, root: Path):
        try:  # the matcher Ray itself uses; a private module of Ray's, so it may move
            from ray._private.thirdparty.pathspec import PathSpec
        except ImportError:
            PathSpec = None  # noqa: N806 (then nothing is known to be left out: no refusal)
        self.root, self.spec = root, PathSpec
        self.names = [".rayignore"] + [".gitignore"] * (
            os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1")
        self.base = [] if PathSpec is None else \
            [(root, "the job's excludes", PathSpec.from_lines("gitwildmatch", EXCLUDES))]
        self.by_folder: dict[Path, list[tuple[Path, str, Any]]] = {}

    def _ignore_files(self, folder: Path) -> list[tuple[Path, str, Any]]:
        if folder not in self.by_folder:
            found = [folder / n for n in self.names if (folder / n).is_file()]
            self.by_folder[folder] = [(folder, str(f), self.spec.from_lines(
                "gitwildmatch", f.read_text(errors="replace").splitlines())) for f in found]
        return self.by_folder[folder]

    def why(self, path: Path) -> str | None:
        if self.spec is None:
            return None
        rules, folder = list(self.base), self.root
        for part in path.relative_to(self.root).parts:
            rules += self._ignore_files(folder)
            folder = folder / part
            for base, what, spec in rules:
                if spec.match_file(folder.relative_to(base).as_posix()):
                    return f"{folder.relative_to(self.root).as_posix()} is excluded by {what}"
        return None


def _inside(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        raise UserError(f"{path}: the sweep file must be inside the working directory {root} "
                        f"(it is uploaded as the job's working directory); use --working-dir"
                        ) from None


def status(job_id: str, address: str) -> dict[str, Any]:
    return _status(client(address), job_id, address)


def wait(job_id: str, address: str, poll_s: float = 5.0) -> dict[str, Any]:
    """The job's status once it has ended (SUCCEEDED, FAILED or STOPPED), polling every
    `poll_s` seconds through one client."""
    jobs = client(address)
    info = _status(jobs, job_id, address)
    while info["status"] not in TERMINAL:
        time.sleep(poll_s)
        info = _status(jobs, job_id, address)
    return info


def _status(jobs: Any, job_id: str, address: str) -> dict[str, Any]:
    info = _call(jobs.get_job_info, job_id, address)
    return {"job_id": job_id, "status": str(getattr(info.status, "value", info.status)),
            "message": info.message or "", "entrypoint": info.entrypoint,
            "start_time": info.start_time, "end_time": info.end_time}


def stop(job_id: str, address: str) -> bool:
    """Ask the job to stop: Ray sends its driver SIGTERM, which stops the sweep as Ctrl-C does
    (the trials running are stopped, every finished one stays stored, the store's lease is let
    go: submitting the file again resumes it). False when the job had ended already."""
    return bool(_call(client(address).stop_job, job_id, address))


def sweep_jobs(address: str) -> list[dict[str, Any]]:
    """The sweeps submitted to the cluster (jobs whose metadata names a sweep, as `submit`
    sets it; the storage checks and other people's jobs are not sweeps), oldest first."""
    jobs = client(address)
    try:
        details = jobs.list_jobs()
    except (RuntimeError, ConnectionError, OSError) as exc:
        raise UserError(f"dashboard {address}: listing its jobs failed ({first_line(exc)})"
                        ) from None
    rows = [{"job_id": d.submission_id or d.job_id, "sweep": (d.metadata or {})["sweep"],
             "status": str(getattr(d.status, "value", d.status)),
             "start_time": d.start_time, "end_time": d.end_time}
            for d in details if "sweep" in (d.metadata or {})]
    return sorted(rows, key=lambda r: r["start_time"] or 0)


def logs(job_id: str, address: str) -> str:
    return _call(client(address).get_job_logs, job_id, address)


def follow_logs(job_id: str, address: str, out: Any = None) -> None:
    """Print the job's logs as they come, until the job ends, to `out` (default: the
    sys.stdout of the moment, not the one at import, which a redirect has replaced)."""
    out = sys.stdout if out is None else out
    import asyncio

    import aiohttp  # what Ray's client streams the logs with

    jobs = client(address)
    _call(jobs.get_job_info, job_id, address)  # a clear error for an unknown job

    async def tail() -> None:
        async for chunk in jobs.tail_job_logs(job_id):
            out.write(chunk)
            out.flush()

    try:
        asyncio.run(tail())
    except (RuntimeError, OSError, aiohttp.ClientError) as exc:
        # the stream broke off (the head restarted, the network dropped): the job goes on
        raise UserError(f"job {job_id} at {address}: the log stream broke off "
                        f"({first_line(exc)}); the job is not stopped: `mutransfer logs "
                        f"{job_id} --dashboard {address} --follow` again") from None


def _call(fn, job_id: str, address: str) -> Any:
    try:
        return fn(job_id)
    except RuntimeError as exc:
        if "404" in str(exc) or "does not exist" in str(exc):
            raise UserError(f"no job {job_id} at {address}") from None
        raise UserError(f"job {job_id} at {address}: {first_line(exc)}") from None
    except (ConnectionError, OSError) as exc:
        raise UserError(f"dashboard {address}: cannot reach the Ray dashboard there "
                        f"({first_line(exc)})") from None


