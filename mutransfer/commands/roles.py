"""`mutransfer roles CONFIG`: each parameter's role (from model.roles, the modules' own, or
inferred from two widths), printed as a `model.roles` block to paste into the config and edit.

CONFIG: a sweep file, a check file or one trial's config; its `model` (and `data`, for the
vocabulary) are used. Importing a `package.module:factory` runs its code.
"""

from __future__ import annotations

# the sections of the config that roles reads (a sweep's axes, train, ... are not used)
SECTIONS = ("model", "data", "param")


def add_arguments(p, name: str) -> None:
    p.add_argument("config", help="sweep, check or trial config (YAML)")
    p.add_argument("--width", type=int, default=None,
                   help="the width to build at (default: twice model.base_width)")


def run(args) -> int:
    from mutransfer.config import TrialConfig
    from mutransfer.configbase import read_yaml, validate
    from mutransfer.cost.machine import beyond_memory, memory_bytes
    from mutransfer.data import load_data
    from mutransfer.errors import UserError
    from mutransfer.models.factory import probe
    from mutransfer.param.roles import roles_table

    raw = read_yaml(args.config)
    # each section as written (a missing or empty one: its defaults): one that is not a
    # mapping is refused by the validation, in its words
    sections = {k: {} if raw.get(k) is None else raw[k] for k in SECTIONS}
    base = base_width(sections["model"], args.config)
    width = 2 * base if args.width is None else args.width  # --width 0 is a width, refused
    if width <= base:
        raise UserError(f"--width {width}: give a width above model.base_width {base}")
    cfg = validate(TrialConfig, {"width": width, **sections}, source=args.config)
    why = beyond_memory(cfg.model_dump(), memory_bytes())  # before the data loads, or a
    if why:  # 10^8-layer model is built block by block without end
        raise UserError(f"{args.config}: width {width}: {why}")
    source = load_data(cfg.data)
    built = probe(cfg, source.spec)
    shapes = {n: tuple(p.shape) for n, p in built.model.named_parameters()}
    how = ("from model.roles" if cfg.model.roles else
           "declared by the modules or inferred from widths "
           f"{base} and {width}")
    print(f"# roles of {cfg.model.arch} ({how}); shapes at width {width}")
    print("model:")
    print(roles_table(built.roles, shapes))
    return 0


def base_width(model: object, source: str) -> int:
    """model.base_width of the config's model section, the section checked first, as
    `model.<field>` (before: `base_width: abc`, `model: 3` or `data: [a]` ended in a
    traceback, and `base_width: 1.5` was refused as a width below 8)."""
    from mutransfer.config import ModelConfig
    from mutransfer.configbase import StrictModel, validate

    class ModelSection(StrictModel):  # here: `mutransfer --help` imports no config code
        model: ModelConfig = ModelConfig()

    return validate(ModelSection, {"model": model}, source=source).model.base_width
