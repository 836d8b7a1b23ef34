"""`mutransfer submit FILE --dashboard http://HEAD:8265`: run a sweep as a Ray job."""

from __future__ import annotations


def add_arguments(p, name: str) -> None:
    p.add_argument("file", help="sweep file (YAML), inside the working directory")
    p.add_argument("--storage", default=None,
                   help="results location every node reaches (absolute shared path or URI); "
                        "default: the file's storage")
    p.add_argument("--working-dir", default=None,
                   help="folder uploaded as the job's working directory (default: the "
                        "current one); results/ and data/ are not uploaded")
    p.add_argument("--job-id", default=None, help="choose the job id (default: Ray's)")
    p.add_argument("--no-analysis", action="store_true", help="skip the analysis at the end")
    from mutransfer.commands.jobs import add_dashboard
    from mutransfer.commands.options import add_max_cells

    add_dashboard(p)
    add_max_cells(p)


def run(args) -> int:
    from mutransfer.sweep.run.jobs import submit

    job_id = submit(args.file, args.dashboard, working_dir=args.working_dir,
                    storage=args.storage, analysis=not args.no_analysis, job_id=args.job_id,
                    max_cells=args.max_cells)
    print(job_id)
    print(f"follow it: mutransfer status {job_id} --dashboard {args.dashboard}  |  "
          f"mutransfer logs {job_id} --dashboard {args.dashboard} --follow")
    return 0
