"""`mutransfer status JOB`, `mutransfer logs JOB [--follow]` and `mutransfer stop JOB` of a
submitted sweep, and `mutransfer jobs`: the sweeps submitted to a cluster."""

from __future__ import annotations

import argparse
import re
import sys
import time

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
    if name != "jobs":
        p.add_argument("job_id", type=job_id, help="the id `mutransfer submit` printed")
    add_dashboard(p)
    if name == "logs":
        p.add_argument("--follow", "-f", action="store_true",
                       help="keep printing until the job ends")
    elif name in ("status", "stop"):
        p.add_argument("--wait", action="store_true",
                       help="wait until the job ends; exit 0 if it succeeded, 1 otherwise"
                       if name == "status" else "wait until the job has stopped")
    p.set_defaults(_name=name)


def run(args) -> int:
    from mutransfer.sweep.run import jobs

    if args._name == "jobs":
        print(_listing(jobs.sweep_jobs(args.dashboard), args.dashboard))
        return 0
    if args._name == "logs":
        if args.follow:
            jobs.follow_logs(args.job_id, args.dashboard)
        else:
            sys.stdout.write(jobs.logs(args.job_id, args.dashboard))
        return 0
    if args._name == "stop":
        return _stop(jobs, args)
    info = (jobs.wait if args.wait else jobs.status)(args.job_id, args.dashboard)
    print(_status_line(info))
    if args.wait:
        return 0 if info["status"] == "SUCCEEDED" else 1
    return 0


def _stop(jobs, args) -> int:
    """Stop the job (a job that had ended is said so, exit 0 either way: it is not running)."""
    if not jobs.stop(args.job_id, args.dashboard):
        print(_status_line(jobs.status(args.job_id, args.dashboard)) + " (it had ended)")
        return 0
    if args.wait:
        print(_status_line(jobs.wait(args.job_id, args.dashboard, poll_s=1.0)))
    else:
        print(f"{args.job_id}: stopping (finished trials stay stored; submit the sweep file "
              f"again to resume it)")
    return 0


def _status_line(info: dict) -> str:
    message = f"  {info['message']}" if info["message"] else ""
    return f"{info['job_id']}: {info['status']}{message}"


def _listing(rows: list[dict], dashboard: str) -> str:
    """One line per submitted sweep: job id, status, sweep name, start (UTC), run time."""
    if not rows:
        return f"no sweep jobs at {dashboard}"
    import pandas as pd

    def when(ms) -> str:
        return "-" if not ms else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))

    def took(row) -> str:
        if not row["start_time"]:
            return "-"
        end = row["end_time"] or time.time() * 1000
        return f"{(end - row['start_time']) / 1000:.0f} s"

    table = pd.DataFrame({"job id": [r["job_id"] for r in rows],
                          "status": [r["status"] for r in rows],
                          "sweep": [r["sweep"] for r in rows],
                          "started (UTC)": [when(r["start_time"]) for r in rows],
                          "ran": [took(r) for r in rows]})
    return table.to_string(index=False)
