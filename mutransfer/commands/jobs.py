"""`mutransfer status JOB` and `mutransfer logs JOB [--follow]` of a submitted sweep."""

from __future__ import annotations

import sys


def add_arguments(p, name: str) -> None:
    p.add_argument("job_id", help="the id `mutransfer submit` printed")
    p.add_argument("--address", required=True, help="the cluster's dashboard, e.g. "
                                                    "http://HEAD:8265")
    if name == "logs":
        p.add_argument("--follow", "-f", action="store_true",
                       help="keep printing until the job ends")
    else:
        p.add_argument("--wait", action="store_true",
                       help="wait until the job ends; exit 0 if it succeeded, 1 otherwise")
    p.set_defaults(_name=name)


def run(args) -> int:
    from mutransfer.sweep import jobs

    if args._name == "logs":
        if args.follow:
            jobs.follow_logs(args.job_id, args.address)
        else:
            sys.stdout.write(jobs.logs(args.job_id, args.address))
        return 0
    info = (jobs.wait if args.wait else jobs.status)(args.job_id, args.address)
    message = f"  {info['message']}" if info["message"] else ""
    print(f"{info['job_id']}: {info['status']}{message}")
    if args.wait:
        return 0 if info["status"] == "SUCCEEDED" else 1
    return 0
