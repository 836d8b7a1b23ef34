"""`mutransfer doctor [--address ADDR] [SWEEP]`: is this machine (or a cluster) ready?

Checks, each printed as a line (ok / skip / FAIL): the versions of Python and the libraries;
the devices; each scan backend's output and gradients against the reference loop at a small
shape, and its time at a typical one (CPU: chunked; CUDA: triton, mamba_ssm when installed,
chunked), remembering the fastest that passes as what `auto` runs on this device with these
versions (mutransfer/ops/check.py); the Ray cluster at --address (nodes, CPUs, GPUs and their
types); that the storage is writable; for a sweep (or check) file, that it validates and its
data and tokenizer are there, whether its token cache is prepared, and that each of its trials
fits where the sweep would run it: this machine (its CPUs, GPUs and memory), or with --address
the cluster's largest node, by the checks the sweep itself makes once Ray is up
(runner.ResourcesFor.check, packing.check_fits_in). Exit 0 when ready, else 2 with one line per
problem on stderr.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from mutransfer import __version__


def add_arguments(p, name: str) -> None:
    from mutransfer.commands.options import cluster_address

    p.add_argument("file", nargs="?", default=None,
                   help="a sweep (or check) file: check that it validates, its data and "
                        "tokenizer, and its token cache")
    p.add_argument("--address", default=None, type=cluster_address,
                   help="a Ray cluster (HOST:6379, ray://HOST:10001 or auto): list its nodes, "
                        "CPUs and GPUs")
    p.add_argument("--storage", default=None,
                   help="results location to check for writing (default: the sweep file's, "
                        "else results/)")


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)

    def ok(self, text: str) -> None:
        print(f"ok    {text}")

    def skip(self, text: str) -> None:
        print(f"skip  {text}")

    def fail(self, text: str) -> None:
        print(f"FAIL  {text}")
        self.problems.append(text)


def run(args) -> int:
    report = Report()
    versions(report)
    scan_backends(report)
    # the cluster stays connected for the sweep file's checks: its trials are held to the
    # largest node's resources, as the sweep holds them once connected
    with ExitStack() as stack:
        cap = cluster(report, args.address, stack) if args.address else None
        if not args.address:
            report.skip("Ray cluster (no --address: sweeps start a local Ray)")
        storage(report, args.storage, args.file)
        if args.file:
            sweep_file(report, args.file, args.address, cap)
    sys.stdout.flush()
    if report.problems:
        for problem in report.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    print("ready")
    return 0


# the optional packages, by distribution name, and the module each provides
OPTIONAL = {"triton": "triton", "mamba-ssm": "mamba_ssm", "tiktoken": "tiktoken",
            "tokenizers": "tokenizers"}


def _version(dist: str) -> str | None:
    """The installed version of `dist`; for an optional package importable without being
    installed (a source tree on PYTHONPATH, as the GPU machine's kit provides mamba_ssm),
    "from source (its folder)"; None when neither."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        pass
    module = OPTIONAL.get(dist)
    spec = importlib.util.find_spec(module) if module else None
    if spec is None:
        return None
    where = list(spec.submodule_search_locations or []) or [spec.origin]
    return f"from source ({where[0]})"


def local_cpus() -> int:
    """The CPUs a local Ray started here offers (Ray counts os.cpu_count(); a container's CPU
    quota can lower its count further)."""
    return os.cpu_count() or 1


def versions(r: Report) -> None:
    import platform

    import torch

    from mutransfer.cost.machine import memory_bytes

    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
    # run from a checkout without being installed (the lent GPU machine): the package's own
    r.ok(f"python {platform.python_version()}, mutransfer {_version('mutransfer') or __version__}, "
         f"torch {torch.__version__} ({build}), "
         f"ray {_version('ray')}, numpy {_version('numpy')}, pyarrow {_version('pyarrow')}")
    optional = {d: _version(d) for d in OPTIONAL}
    r.ok("optional: " + ", ".join(f"{d} {v or 'not installed'}" for d, v in optional.items()))
    memory = memory_bytes()
    r.ok(f"this machine: {local_cpus()} CPUs (what a local Ray offers), "
         + (f"{memory / 1e9:.1f} GB memory" if memory else "memory unknown"))
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        r.ok(f"CUDA devices: {', '.join(names)}")
    else:
        r.skip("CUDA: no CUDA device here; the GPU checks (triton, mamba_ssm) are skipped")


def scan_backends(r: Report) -> None:
    import torch

    from mutransfer.configbase import user_dir
    from mutransfer.ops.backends import remember
    from mutransfer.ops.check import check_backend

    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    for device in devices:
        names = ["chunked"] if device.type == "cpu" else ["triton", "mamba_ssm", "chunked"]
        dtype = torch.float32
        passed = []
        for name in names:
            c = check_backend(name, device, dtype)
            where = f"scan {name} on {device.type}"
            if c.error and name == "mamba_ssm" and _version("mamba-ssm") is None:
                r.skip(f"{where}: mamba-ssm not installed (optional)")
            elif c.error:
                r.fail(f"{where}: did not run ({c.error})")
            elif not c.ok:
                r.fail(f"{where}: wrong: relative error {c.out_err:.1e} (output), "
                       f"{c.grad_err:.1e} (gradients) against the reference loop")
            else:
                r.ok(f"{where}: output {c.out_err:.1e}, gradients {c.grad_err:.1e} from the "
                     f"reference; forward+backward {c.ms:.1f} ms at a typical shape")
                passed.append(c)
        if not passed:
            continue
        best = min(passed, key=lambda c: c.ms)
        if device.type == "cuda":
            name = torch.cuda.get_device_name(device)
            try:
                path = remember(device, best.backend)
            except OSError as exc:  # a read-only home: the checks still hold, auto's default runs
                r.skip(f"auto on {name}: {best.backend} is the fastest that passed, but it "
                       f"cannot be remembered ({exc.strerror or exc}: "
                       f"{exc.filename or user_dir()}); `auto` runs its default instead "
                       f"(set MUTRANSFER_DATA_DIR to a writable folder)")
                continue
            r.ok(f"auto on {name}: {best.backend} (the fastest that passed; remembered in "
                 f"{path})")
        else:
            r.ok(f"auto on cpu: {best.backend}")


def _or_fail(r: Report, prefix: str, fn: Callable[[], Any]) -> Any:
    """fn()'s result, or None after a FAIL line saying its UserError."""
    from mutransfer.errors import UserError

    try:
        return fn()
    except UserError as exc:
        r.fail(f"{prefix}{exc}")
        return None


def cluster(r: Report, address: str, stack: ExitStack):
    """The cluster's nodes and resources; the Capacity of its largest node, connected until
    `stack` closes, or None after a FAIL line when it cannot be reached."""
    from mutransfer.sweep.run.cluster import ray_session
    from mutransfer.sweep.run.inspect import cluster_summary

    prefix = f"Ray cluster at {address}: "
    cap = _or_fail(r, prefix, lambda: stack.enter_context(ray_session(address)))
    if cap is None:
        return None
    # "auto" inside the session: the Ray this process is connected to now (a session opened
    # in one is that Ray, left running); not `address`, which Ray may know by another host
    for line in _or_fail(r, prefix, lambda: cluster_summary("auto")) or []:
        r.ok(f"Ray {line}")
    return cap


def storage(r: Report, location: str | None, sweep: str | None) -> None:
    from mutransfer.errors import UserError
    from mutransfer.results.fs import is_uri

    # a sweep's store (given, or the sweep file's): also what a sweep refuses to write into;
    # not the default results/ (the folder the stores are in) nor a check's output folder
    store = location is not None
    if sweep is not None:
        try:
            from mutransfer.commands.check_spec import is_check_file, load_check
            from mutransfer.sweep.plan.spec import load_spec

            check = is_check_file(sweep)
            store = store and not check
            if location is None:
                location = (str(load_check(sweep).out) if check else
                            load_spec(sweep).storage_location)
                store = not check
        except UserError:
            pass  # the sweep file's own check says why
    if location == "":  # not "no --storage": Path("") would check the current folder
        r.fail("storage '': an empty path; give a folder or URI")
        return
    location = location or "results"
    if is_uri(location):
        r.skip(f"storage {location}: a URI (its access is checked when a sweep writes)")
        return
    from mutransfer.commands.outputs import check_output_dir
    from mutransfer.paths import nearest_existing
    from mutransfer.results.store import Store

    path = Path(location).expanduser().absolute()
    try:  # a file made and removed there: permission bits say yes for root, and on /proc
        check_output_dir(path, "storage")
        if store:  # a folder of other files, a store of another format, inside a store
            Store(path).check_is_store()
    except UserError as exc:
        r.fail(str(exc))
        return
    r.ok(f"storage {location}: writable ({nearest_existing(path)})")


def sweep_file(r: Report, path: str, address: str | None = None, cap=None) -> None:
    """The sweep (or check) file's checks; `cap`: the connected cluster's largest node (None:
    no --address, or a cluster that could not be reached)."""
    from mutransfer.commands.check_spec import is_check_file
    from mutransfer.data.cache import locate, open_cache
    from mutransfer.data.cached import CACHED_SOURCES
    from mutransfer.data.config import DataConfig
    from mutransfer.sweep.run.driver import prepare

    kind = _or_fail(r, "", lambda: "check" if is_check_file(path) else "sweep")
    plan = _or_fail(r, "", lambda: _check_plan(path) if kind == "check" else prepare(path)) \
        if kind else None
    if plan is None:
        return
    what = "a check file" if kind == "check" else f"{plan.n_trials} trials"
    r.ok(f"{path}: valid, {what}; data and tokenizer present")
    if address is None:
        _fits_here(r, plan, path)
    elif cap is not None:
        _or_fail(r, "", lambda: _fits_cluster(plan, path, cap))
    for raw in plan.data_configs():
        cfg = DataConfig.model_validate(raw)
        if cfg.source not in CACHED_SOURCES:
            continue
        ref = locate(cfg)
        if open_cache(ref) is not None:
            r.ok(f"token cache of {cfg.source} ({cfg.tokenizer}): prepared ({ref.path})")
            continue
        # a folder that takes no file was refused with the plan (data/preflight.py)
        r.ok(f"token cache of {cfg.source} ({cfg.tokenizer}): not prepared yet; the "
             f"sweep prepares it before its first trial (or `mutransfer prepare {path}`)")


# with no --address a trial that does not fit here can still run on a cluster
ELSEWHERE = "; run it on a cluster (doctor --address HEAD:6379 checks one)"


def _fits_here(r: Report, plan, path: str) -> None:
    """With no --address a sweep runs on a local Ray, on this machine: a FAIL line for each
    way a trial could not run here, as the sweep would refuse it (GPUs, CPUs, memory)."""
    from mutransfer.sweep.run.driver import check_runs_here

    if _or_fail(r, "", lambda: _gpus_here(plan, path)) is not None:
        _or_fail(r, "", lambda: _cpus_here(plan, path))
    _or_fail(r, "", lambda: check_runs_here(plan, None))


def _gpus_here(plan, path: str) -> bool:
    """A trial that asks Ray for more GPUs than this machine has would wait forever (the sweep
    refuses it once Ray is up), one on `device: cuda` without a CUDA device fails; UserError
    for either, instead of `ready`; True when neither."""
    import torch

    from mutransfer.errors import UserError
    from mutransfer.sweep.plan.packing import gpus_for

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    configs = [u.config for u in (plan.groups or plan.cells)]
    need = max(gpus_for(plan.spec.resources, c) for c in configs)
    if need > have:
        raise UserError(f"{path}: a trial asks for {need:g} GPUs (resources.gpus_per_trial) "
                        f"but this machine has {have}{ELSEWHERE}")
    if not have and any(c["train"].get("device") == "cuda" for c in configs):
        raise UserError(f"{path}: train.device cuda, but this machine has no CUDA "
                        f"device{ELSEWHERE}")
    return True


def _cpus_here(plan, path: str) -> None:
    """A trial asking for more CPUs than the local Ray offers: the sweep's own refusal
    (runner.ResourcesFor.check) against this machine as a one-node cluster."""
    import torch

    from mutransfer.errors import UserError
    from mutransfer.sweep.run.cluster import Capacity

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        _resources(plan).check(Capacity(float(local_cpus()), float(gpus), 1))
    except UserError as exc:
        raise UserError(f"{path}: {exc}{ELSEWHERE}") from None


def _fits_cluster(plan, path: str, cap) -> None:
    """Each trial against the cluster's largest node, as the sweep checks it once connected:
    its CPUs and GPUs (a trial no node can host waits forever), then its memory."""
    from mutransfer.errors import UserError
    from mutransfer.sweep.plan.packing import check_fits_in

    try:
        _resources(plan).check(cap)
        check_fits_in([u.config for u in (plan.groups or plan.cells)], cap.memory,
                      cap.largest)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None


def _resources(plan):
    """The per-trial resources of every trial of the plan, as the sweep asks Ray for them."""
    from mutransfer.sweep.run.runner import ResourcesFor
    from mutransfer.sweep.search.base import Work

    return ResourcesFor(plan, Work(cells=list(plan.cells), groups=list(plan.groups)))


def _check_plan(path: str):
    """A check file as `mutransfer check` loads it (every refusal before it runs), its data
    checked: the plan of its transfer stage."""
    from mutransfer.commands import check_plan

    c = check_plan.checked(path)
    check_plan.check_transfer_data(c.plan, path)
    return c.plan
