"""`mutransfer coord-check`: activation sizes against width (or depth), with a verdict per
parameterization. Parses the options into CoordSettings and prints what
`mutransfer.coord_check` returns."""

from __future__ import annotations

import sys

from mutransfer.errors import UserError

# CoordSettings field -> the option that sets it (where the two names differ)
OPTION = {"params": "--param", "overrides": "--set", "depths": "--depths", "width": "--width",
          "depth_fields": "--depth-set"}


def option(field: str) -> str:
    """The option a CoordSettings field comes from: params -> --param, base_width -> ..."""
    return OPTION.get(field, "--" + field.replace("_", "-"))


def add_arguments(p, name: str) -> None:
    from mutransfer.coord.settings import DEFAULT_LR, DEPTH_WIDTH, CoordSettings

    d = CoordSettings()  # the defaults, in one place
    p.add_argument("--widths", type=int, nargs="+", default=None,
                   help=f"widths to compare (default: {' '.join(map(str, d.widths))})")
    p.add_argument("--param", nargs="+", default=d.params,
                   help=f"parameterizations (default: {' '.join(d.params)})")
    p.add_argument("--optimizer", choices=tuple(DEFAULT_LR), default=d.optimizer,
                   help="optimizer (default: %(default)s)")
    p.add_argument("--lr", type=float, default=None, help="learning rate at the base width "
                   "(default: " + ", ".join(f"{lr:g} ({opt})" for opt, lr in DEFAULT_LR.items())
                   + ")")
    p.add_argument("--steps", type=int, default=d.steps,
                   help="training steps measured after init (default: %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=d.seeds,
                   help=f"seeds, each its own init and batches (default: {d.seeds[0]}-"
                   f"{d.seeds[-1]})")
    p.add_argument("--base-width", type=int, default=None,
                   help="width the parameterizations are relative to (default: the smallest "
                   "width)")
    p.add_argument("--n-layer", type=int, default=None,
                   help=f"blocks of each model (default: {d.n_layer}; a depth check sets it)")
    p.add_argument("--depths", type=int, nargs="+", default=None, metavar="N_LAYER",
                   help="a depth check: slopes against log2 n_layer over these depths at one "
                   "--width (default: none, a width check)")
    p.add_argument("--width", type=int, default=None,
                   help=f"the width a depth check holds fixed (default: {DEPTH_WIDTH})")
    p.add_argument("--depth-param", default=None, metavar="NAME",
                   help="sets param.depth (a depth parameterization) where the config has it "
                   "(default: unset, the model as it is)")
    p.add_argument("--depth-set", dest="depth_fields", action="append", default=[],
                   metavar="FIELD=VALUE",
                   help="a field of the depth rule under param, e.g. depth_alpha=0.75 or "
                   "depth_exponents.conv.lr_adam=0.2 (default: the preset's; repeatable)")
    p.add_argument("--batch-size", type=int, default=d.batch_size,
                   help="sequences per training batch (default: %(default)s)")
    p.add_argument("--seq-len", type=int, default=d.seq_len,
                   help="tokens per sequence (default: %(default)s)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="PARAM.ROLE.ENTRY=VALUE",
                   help="override a table entry, e.g. mup_ssm.ssm_B.lr_adam_m=-0.5 "
                   "(default: none; repeatable)")
    p.add_argument("--model", dest="model", action="append", default=[], metavar="FIELD=VALUE",
                   help="a model config field, e.g. tie_embeddings=false, mamba2.headdim=8 "
                   "(default: none; repeatable)")
    p.add_argument("--out", default="results/coord_check",
                   help="output folder; RESULTS_DIR/coord_check puts it in that study's report "
                   "(default: %(default)s)")
    p.add_argument("--tolerance", type=float, default=d.tolerance,
                   help="largest |slope of log2 RMS vs log2 width| that counts as flat "
                   "(default: %(default)s)")
    p.add_argument("--alpha", type=float, default=d.alpha,
                   help="family-wise error rate of the violations: a slope outside the "
                   "tolerance counts when its Holm-adjusted t-test p is at most this "
                   "(default: %(default)s)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a feature-learning parameterization fails, sp passes, or "
                   "either is inconclusive; a depth check: when any fails or is inconclusive "
                   "(default: off)")


def _parse_overrides(items: list[str]) -> dict:
    from mutransfer.configbase import parse_set

    out: dict = {}
    for key, value in parse_set(items):
        parts = key.split(".")
        if len(parts) != 3:
            raise UserError(f"--set {key}: expected PARAM.ROLE.ENTRY=VALUE")
        param, role, entry = parts
        out.setdefault(param, {}).setdefault(role, {})[entry] = value
    return out


def _parse_model(items: list[str]) -> dict:
    """Model fields; a dotted one (mamba2.headdim=8, dt_init.kappa=2) sets a nested field, as
    `mutransfer train --set model.mamba2.headdim=8` does."""
    from mutransfer.configbase import parse_set, set_dotted

    for item in items:
        if "=" not in item:
            raise UserError(f"--model {item!r}: expected FIELD=VALUE")
    out: dict = {}
    for key, value in parse_set(items):
        set_dotted(out, key, value)
    return out


def _parse_depth_fields(items: list[str]) -> dict:
    from mutransfer.configbase import parse_set

    for item in items:
        if "=" not in item:
            raise UserError(f"--depth-set {item!r}: expected FIELD=VALUE")
        if not item.startswith(("depth_alpha=", "depth_exponents.")):
            raise UserError(f"--depth-set {item!r}: a depth rule field is depth_alpha or "
                            "depth_exponents.TENSOR.ENTRY")
    return dict(parse_set(items))


def settings_from(args):
    """CoordSettings from the parsed options (an option that does not fit: UserError). The
    values themselves are judged by `coord_check` (coord/check.py), naming the options."""
    from mutransfer.coord.settings import DEPTH_WIDTH, CoordSettings

    d = CoordSettings()
    if args.depths:
        if args.widths is not None:
            raise UserError("--widths: a depth check holds one width fixed: give --width")
        if args.n_layer is not None:
            raise UserError("--n-layer: a depth check sets it from --depths")
        widths = [args.width if args.width is not None else DEPTH_WIDTH]
    else:
        if args.width is not None:
            raise UserError("--width: only with --depths (a width check takes --widths)")
        widths = sorted(set(args.widths)) if args.widths is not None else d.widths
    return CoordSettings(
        widths=widths, params=args.param, optimizer=args.optimizer, lr=args.lr,
        steps=args.steps, seeds=args.seeds, base_width=args.base_width,
        n_layer=args.n_layer if args.n_layer is not None else d.n_layer,
        batch_size=args.batch_size, seq_len=args.seq_len,
        overrides=_parse_overrides(args.overrides), model=_parse_model(args.model),
        depths=args.depths, depth_param=args.depth_param,
        depth_fields=_parse_depth_fields(args.depth_fields), tolerance=args.tolerance,
        alpha=args.alpha)


def run(args) -> int:
    """Parse, check the output folder, run `mutransfer.coord_check`, write and print. The
    settings (seeds, a batch the machine cannot hold, ...) are checked by `coord_check`
    itself, before the corpus loads, in messages that name the options (`name=option`)."""
    from mutransfer.commands.outputs import local_output_dir
    from mutransfer.coordcheck import coord_check
    from mutransfer.statusline import StatusLine

    out = local_output_dir(args.out)  # before the measurements, not after them
    s = settings_from(args)
    status = StatusLine(sys.stderr)
    try:
        result = coord_check(s, name=option, progress=lambda done, total, what: status.draw(
            f"[{done}/{total}] {what}"))
    finally:
        status.close()
    files = result.write(out)
    print(result.summary())
    print(result.text())
    print(f"\nwrote {', '.join(str(f) for f in files)}")
    if args.strict and (bad := result.strict_failures()):
        print("strict: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0
