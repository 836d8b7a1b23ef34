"""The `mutransfer` command: one module per subcommand under `mutransfer/commands/`.

Each module exposes `add_arguments(parser, name)` and `run(args) -> int`; the one-line help
of each command is in `COMMANDS` below. Modules are imported only when their command runs,
so `mutransfer analyze` never imports torch or Ray.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings

# What `mutransfer --help` says above the list of commands.
DESCRIPTION = (
    "Does a learning rate tuned on a small Mamba model transfer to a large one? mutransfer "
    "trains grids of width x learning rate x parameterization (sp, mup, spectral, mup_ssm) x "
    "seed on Ray (this machine, or a cluster), stores every loss in Parquet, and reports the "
    "optimal learning rate at each width, its drift with width, where training turns "
    "unstable, and the transfer plots. The three main commands: `mutransfer sweep FILE` runs "
    "a sweep file (try sweeps/quickstart.yaml), `mutransfer analyze RESULTS` prints the "
    "tables, `mutransfer plot RESULTS` draws the plots and report.html.")
EPILOG = "`mutransfer COMMAND --help` lists a command's options."

# (command, module under mutransfer.commands, one-line help), in the order --help lists them
COMMANDS: list[tuple[str, str, str]] = [
    ("sweep", "sweep", "run a sweep file on local Ray or a cluster"),
    ("analyze", "analyze", "optimal LR, drift, stability and regret tables"),
    ("plot", "plot", "transfer plots and report.html"),
    ("validate", "validate", "check a sweep file, count its cells, estimate its cost"),
    ("prepare", "prepare", "tokenize a sweep's data once, into the token cache"),
    ("doctor", "doctor", "is this machine (or a cluster) ready to run sweeps?"),
    ("schema", "validate", "print the JSON schema of sweep files"),
    ("submit", "submit", "submit a sweep as a Ray job to a cluster"),
    ("status", "jobs", "status of a submitted sweep job"),
    ("logs", "jobs", "logs of a submitted sweep job"),
    ("stop", "jobs", "stop a submitted sweep job (what finished stays stored)"),
    ("jobs", "jobs", "the sweep jobs submitted to a cluster"),
    ("train", "train", "run one trial from a config file"),
    ("coord-check", "coord_check", "coordinate check: activation sizes against width or depth"),
    ("check", "check", "does the LR transfer for this model? coordinates + drift, one verdict"),
    ("roles", "roles", "the parameters' roles of a config's model, as a table to paste"),
    ("autocorr", "autocorr", "autocorrelation lambda_max and timescale against length"),
]


def version() -> str:
    """The package's version (one source: `mutransfer.__version__`, which pyproject reads)."""
    from mutransfer import __version__

    return __version__


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (`error: ...`) and exit code 2, like every other bad input."""

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="mutransfer", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"mutransfer {version()}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True,
                                metavar="COMMAND")
    for name, module, help_ in COMMANDS:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_module=module)
        mod = importlib.import_module(f"mutransfer.commands.{module}")
        mod.add_arguments(p, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    from mutransfer.errors import UserError, format_validation_error

    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # a bare `mutransfer`: what it can do
        parser.print_help(sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: a code, as for every error
        return exc.code if isinstance(exc.code, int) else 2
    mod = importlib.import_module(f"mutransfer.commands.{args._module}")
    try:
        with warnings.catch_warnings():  # restored after: main also runs inside notebooks, tests
            warnings.showwarning = _one_line_warning
            return int(mod.run(args) or 0)
    except UserError as exc:
        print(f"{_line_start()}error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{_line_start()}interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except Exception as exc:  # pydantic errors raised outside a loader still become one line
        if type(exc).__name__ == "ValidationError":
            print(f"error: {format_validation_error(exc)}", file=sys.stderr)
            return 2
        raise


def _line_start() -> str:
    """What starts the last line on a terminal: a status line (a trial's progress, the token
    cache's) may be drawn there, not ended, when a Ctrl-C or an error stops the work; erased,
    so that the message is a line of its own (before: '... ETA  12sinterrupted')."""
    from mutransfer.statusline import CLEAR, StatusLine

    return CLEAR if StatusLine(sys.stderr).tty else ""


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command's own line ('warning: ...'), not Python's two lines with the
    source line that raised it (e.g. a store's unreadable parts, skipped)."""
    print(f"warning: {message}", file=file or sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
