"""`mutransfer status JOB` and `mutransfer logs JOB [--follow]` of a submitted sweep."""

from __future__ import annotations

import argparse
import re
import sys

# what `sweep --address` takes (the GCS or the Ray client), never the dashboard; also as a
# URL: http://HEAD:6379 reaches the GCS, which answers no HTTP (a bare "cannot reach")
_NOT_A_DASHBOARD = re.compile(r"^(auto|local|ray://.*|((?i:https?)://)?[^/]*:(6379|10001)/?)$")


def dashboard_url(value: str) -> str:
    """`--dashboard`'s value; a cluster (GCS) address given by mistake gets a one-line hint."""
    if _NOT_A_DASHBOARD.match(value):
        raise argparse.ArgumentTypeError(
            f"{value} is a cluster address for `mutransfer sweep --address` (the GCS, the Ray "
            f"client or auto), not the dashboard: give http://HOST:8265")
    from urllib.parse import urlsplit

    from mutransfer.sweep.run.cluster import host_problem

    try:  # a URL urlsplit refuses (an unclosed IPv6 bracket) is refused where it is used
        host = urlsplit(value if "://" in value else f"http://{value}").hostname
    except ValueError:
        return value
    problem = host_problem(host or "")
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def add_dashboard(p) -> None:
    """--dashboard (alias --address, its former name), shared with submit."""
    p.add_argument("--dashboard", "--address", dest="dashboard", required=True, metavar="URL",
                   type=dashboard_url,
                   help="the cluster's dashboard (Jobs API), e.g. http://HOST:8265; "
                        "--address is the same option under its former name")


def job_id(value: str) -> str:
    """A job id: '' asked the Jobs API for its list of every job, which Ray's client then
    read as one job (a TypeError traceback)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: an empty job id; give the id "
                                         f"`mutransfer submit` printed")
    return value


def add_arguments(p, name: str) -> None:
    p.add_argument("job_id", type=job_id, help="the id `mutransfer submit` printed")
    add_dashboard(p)
    if name == "logs":
        p.add_argument("--follow", "-f", action="store_true",
                       help="keep printing until the job ends")
    else:
        p.add_argument("--wait", action="store_true",
                       help="wait until the job ends; exit 0 if it succeeded, 1 otherwise")
    p.set_defaults(_name=name)


def run(args) -> int:
    from mutransfer.sweep.run import jobs

    if args._name == "logs":
        if args.follow:
            jobs.follow_logs(args.job_id, args.dashboard)
        else:
            sys.stdout.write(jobs.logs(args.job_id, args.dashboard))
        return 0
    info = (jobs.wait if args.wait else jobs.status)(args.job_id, args.dashboard)
    message = f"  {info['message']}" if info["message"] else ""
    print(f"{info['job_id']}: {info['status']}{message}")
    if args.wait:
        return 0 if info["status"] == "SUCCEEDED" else 1
    return 0
