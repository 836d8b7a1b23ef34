"""What several commands share: the options `sweep`, `validate` and `submit` take alike
(--max-cells; --gpu and --mfu), the check of --address's host name, and the probe of a
sweep's user model factories.

Imports are inside the functions, as in every command module: `mutransfer --help` loads no
sweep, cost or model code."""

from __future__ import annotations

from typing import Any


def add_max_cells(p) -> None:
    """--max-cells, shared by sweep, validate and submit."""
    from mutransfer.sweep.plan.size import MAX_CELLS

    p.add_argument("--max-cells", type=positive_int, default=None, metavar="N",
                   help=f"refuse a sweep of more than N cells (default {MAX_CELLS:,}): a "
                        f"guard against a mistyped grid")


def positive_int(text: str) -> int:
    """A count of at least 1 (--max-cells, check --num-cpus): 0 or -1 would refuse every sweep
    saying so only after the file was read (check: after its coordinate stage had run)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a whole number of at least 1")
    return value


def _fraction(text: str) -> float:
    """--mfu's value: refused with the command line, before any file is read or printed."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: give a fraction of the peak in (0, 1], "
                                         "e.g. 0.3")
    return value


def cluster_address(text: str) -> str:
    """--address of sweep and doctor (HOST:PORT, ray://HOST:PORT, auto): a host name no
    lookup takes is refused with the command line; the rest is checked where it is used."""
    import argparse

    from mutransfer.sweep.run.cluster import host_port, host_problem

    problem = host_problem(host_port(text)[0])
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_cost_options(p) -> None:
    """--gpu and --mfu, shared by validate and `sweep --dry-run`."""
    from mutransfer.cost.gpus import GPUS

    p.add_argument("--gpu", default=None, choices=sorted(GPUS), type=str.lower,
                   help="GPU the cost table's GPU-hours are for (default: h100 for a sweep "
                        "on cuda, none for a CPU sweep)")
    p.add_argument("--mfu", type=_fraction, default=None, metavar="F",
                   help="GPU-hours at this fraction of the GPU's peak FLOP/s instead of the "
                        "measured throughput (benchmarks/README.md)")


def factory_note(plan: Any, import_model: bool, check_data: bool = True) -> str:
    """Probe the user factories of the plan (`import_model`: --import), or say they were not
    imported; "" for a plan of built-in models only. Without `check_data` (validate
    --no-data), a model whose data does not load here is imported, not probed: the probe
    builds it on the data's vocabulary, and --no-data promises that data only on the
    cluster is not looked for (before: its 'no such file' refused the file)."""
    from mutransfer.config import TrialConfig
    from mutransfer.errors import UserError

    configs = sorted((TrialConfig.model_validate(c.config) for c in plan.cells),
                     key=lambda t: t.width)
    configs = [t for t in configs if not t.model.builtin]
    if not configs:
        return ""
    archs = sorted({t.model.arch for t in configs})
    if not import_model:
        return f" (model {', '.join(archs)} not imported: --import runs its code to check it)"
    from mutransfer.data import load_data
    from mutransfer.models.factory import import_factory, probe

    seen, unprobed = set(), False
    for t in configs:
        key = (t.model.model_dump_json(), t.width)
        if key in seen or t.width not in (configs[0].width, configs[-1].width):
            continue
        seen.add(key)
        try:
            spec = load_data(t.data).spec
        except UserError:
            if check_data:
                raise
            import_factory(t.model.arch)
            unprobed = True
            continue
        probe(t, spec)
    if unprobed:
        return (f" (model {', '.join(archs)} imported, not probed: its data is not on this "
                f"machine)")
    return f" (model {', '.join(archs)} imported and probed)"
