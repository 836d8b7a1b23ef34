"""`mutransfer coord-check`: activation sizes against width, with a verdict per parameterization."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mutransfer.errors import UserError


def add_arguments(p, name: str) -> None:
    from mutransfer.analysis_defaults import COORD_MARGIN_SE, COORD_TOLERANCE
    from mutransfer.coord.settings import DEFAULT_LR, CoordSettings

    d = CoordSettings()  # the defaults, in one place
    p.add_argument("--widths", type=int, nargs="+", default=d.widths)
    p.add_argument("--param", nargs="+", default=d.params, help="parameterizations")
    p.add_argument("--optimizer", choices=tuple(DEFAULT_LR), default=d.optimizer)
    p.add_argument("--lr", type=float, default=None, help="default: " + ", ".join(
        f"{lr:g} ({opt})" for opt, lr in DEFAULT_LR.items()))
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--seeds", type=int, nargs="+", default=d.seeds,
                   help=f"default: {d.seeds[0]}-{d.seeds[-1]}")
    p.add_argument("--base-width", type=int, default=None, help="default: smallest width")
    p.add_argument("--n-layer", type=int, default=d.n_layer)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="PARAM.ROLE.ENTRY=VALUE",
                   help="override a table entry, e.g. mup_ssm.ssm_B.lr_adam_m=-0.5")
    p.add_argument("--model", dest="model", action="append", default=[], metavar="FIELD=VALUE",
                   help="a model config field, e.g. tie_embeddings=false, embedding_std=1")
    p.add_argument("--out", default="results/coord_check",
                   help="output folder (RESULTS_DIR/coord_check puts it in that study's report)")
    p.add_argument("--tolerance", type=float, default=COORD_TOLERANCE)
    p.add_argument("--margin", type=float, default=COORD_MARGIN_SE,
                   help="standard errors a slope must lie beyond the tolerance to count")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a feature-learning parameterization fails or sp passes")


def _check(args) -> None:
    from mutransfer.param.config import PARAMETERIZATIONS

    if len(set(args.widths)) < 2:
        raise UserError("--widths: give at least two different widths")
    if min(args.widths) < 8:
        raise UserError(f"--widths: {min(args.widths)} is below the minimum width 8")
    if args.base_width is not None and args.base_width > min(args.widths):
        raise UserError("--base-width: must not exceed the smallest width")
    for name in args.param:
        if name not in PARAMETERIZATIONS:
            raise UserError(f"--param: unknown parameterization {name!r} "
                            f"(known: {', '.join(PARAMETERIZATIONS)})")
    if args.lr is not None and not args.lr > 0:
        raise UserError(f"--lr: must be positive, got {args.lr}")
    if args.steps < 1:
        raise UserError("--steps: must be at least 1")
    if args.margin < 0:
        raise UserError(f"--margin: must be >= 0, got {args.margin}")


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
    from mutransfer.configbase import parse_set

    for item in items:
        if "=" not in item:
            raise UserError(f"--model {item!r}: expected FIELD=VALUE")
    return dict(parse_set(items))


def run(args) -> int:
    """Measure (mutransfer.coord, torch), then judge (mutransfer.analysis.coordverdict)."""
    from mutransfer.commands.outputs import check_output_dir

    check_output_dir(args.out)  # before the measurements, not after them
    _check(args)
    from mutransfer.analysis.coordplot import plot_coord_check
    from mutransfer.analysis.coordverdict import (
        judge,
        seed_ranges,
        slopes,
        strict_failures,
        verdict_text,
        verdicts,
    )
    from mutransfer.coord.measure import run_coord_check, trial_config
    from mutransfer.coord.settings import CoordSettings
    from mutransfer.data import load_data
    from mutransfer.data.config import DataConfig
    from mutransfer.statusline import StatusLine

    s = CoordSettings(widths=sorted(set(args.widths)), params=args.param,
                      optimizer=args.optimizer, lr=args.lr, steps=args.steps, seeds=args.seeds,
                      base_width=args.base_width, n_layer=args.n_layer,
                      batch_size=args.batch_size, seq_len=args.seq_len,
                      overrides=_parse_overrides(args.overrides),
                      model=_parse_model(args.model))
    for param in s.params:  # validate overrides before any work
        trial_config(s, param, s.widths[-1], 0)
    source = load_data(DataConfig())
    t0 = time.time()
    status = StatusLine(sys.stderr)
    coord = run_coord_check(s, source, progress=lambda done, total, what: status.draw(
        f"[{done}/{total}] {what}"))
    status.close()
    sl = slopes(coord)
    v = verdicts(sl, tol=args.tolerance, margin=args.margin, seeds=s.seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    coord.to_parquet(out / "coord.parquet", index=False)
    sl.to_parquet(out / "slopes.parquet", index=False)
    v.to_parquet(out / "verdicts.parquet", index=False)
    png = plot_coord_check(coord, out / f"coord_check_{s.optimizer}.png")
    print(f"coordinate check: {s.optimizer}, lr {s.lr:g}, {s.steps} steps, seeds "
          f"{seed_ranges(s.seeds)}, widths {s.widths}, {time.time() - t0:.0f} s")
    print(verdict_text(judge(sl, args.tolerance, args.margin), v, s.steps, args.tolerance,
                       args.margin))
    print(f"\nwrote {out / 'coord.parquet'}, {png}")
    if args.strict and (bad := strict_failures(v)):
        print("strict: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0
