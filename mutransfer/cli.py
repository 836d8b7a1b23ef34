"""The `mutransfer` command: a thin dispatcher over one module per subcommand.

Each subcommand lives in `mutransfer/commands/<name>.py` and exposes `HELP`,
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when their
command runs, so `mutransfer analyze` never imports torch or Ray.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# (command, module under mutransfer.commands, one-line help)
COMMANDS: list[tuple[str, str, str]] = [
    ("coord-check", "coord_check", "coordinate check: activation sizes against width"),
    ("train", "train", "run one trial from a config file"),
    ("sweep", "sweep", "run a sweep file on local Ray or a cluster"),
    ("submit", "submit", "submit a sweep as a Ray job to a cluster"),
    ("status", "jobs", "status of a submitted sweep job"),
    ("logs", "jobs", "logs of a submitted sweep job"),
    ("validate", "validate", "check a sweep file and count its cells"),
    ("schema", "validate", "print the JSON schema of sweep files"),
    ("analyze", "analyze", "optimal LR, drift, stability and regret tables"),
    ("plot", "plot", "transfer plots and report.html"),
    ("autocorr", "autocorr", "autocorrelation lambda_max and timescale against length"),
]


def _available() -> list[tuple[str, str, str]]:
    """Commands whose module exists in this checkout."""
    found = []
    for name, module, help_ in COMMANDS:
        if importlib.util.find_spec(f"mutransfer.commands.{module}") is not None:
            found.append((name, module, help_))
    return found


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (`error: ...`) and exit code 2, like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="mutransfer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, help_ in _available():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        mod = importlib.import_module(f"mutransfer.commands.{module}")
        mod.add_arguments(p, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    from mutransfer.errors import UserError, format_validation_error

    parser = build_parser()
    args = parser.parse_args(argv)
    mod = importlib.import_module(f"mutransfer.commands.{args._module}")
    try:
        return int(mod.run(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except Exception as exc:  # pydantic errors raised outside a loader still become one line
        if type(exc).__name__ == "ValidationError":
            print(f"error: {format_validation_error(exc)}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
