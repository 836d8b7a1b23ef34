"""`mutransfer prepare FILE`: tokenize the data of a sweep (or check) file once, into the token
cache (mutransfer/data/cache.py), before any trial runs. `mutransfer sweep` does the same in its
pre-flight when a cache is missing; this command does it ahead (e.g. on a login node, into a
cache_dir the cluster shares) and says where each cache is."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the modules themselves are imported where used: `mutransfer --help` stays fast
    from mutransfer.data.cache import CacheRef
    from mutransfer.sweep.plan.cells import Plan


def add_arguments(p, name: str) -> None:
    p.add_argument("file", nargs="+", help="sweep or check file(s) (YAML)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes tokenizing Parquet files side by side (default: the CPUs, "
                        "at most one per file)")
    p.add_argument("--force", action="store_true",
                   help="delete the file's caches first and tokenize again (a cache refused "
                        "as changed or damaged)")


def run(args) -> int:
    from mutransfer.data.cache import discard, locate, open_cache
    from mutransfer.data.cached import CACHED_SOURCES, fingerprint_of_cache
    from mutransfer.data.config import DataConfig
    from mutransfer.errors import UserError
    from mutransfer.statusline import human
    from mutransfer.sweep.run.driver import prepare

    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers {args.workers}: give at least 1")
    # every file read and checked before any is tokenized: a typo in the last file is refused
    # at once, not after the hours the first one's corpus takes, with its cache left behind
    plans = [(path, _plan(prepare, path)) for path in args.file]
    for path, plan in plans:
        datas = [d for d in plan.data_configs()
                 if DataConfig.model_validate(d).source in CACHED_SOURCES]
        if not datas:
            print(f"{path}: no text data to tokenize (generated data only)")
            continue
        if args.force:
            for raw in datas:
                ref = locate(DataConfig.model_validate(raw))
                if discard(ref):
                    print(f"{path}: deleted the token cache {ref.path}")
        seconds = _prepare_checked(path, plan, datas, args.workers)
        for raw in datas:
            cfg = DataConfig.model_validate(raw)
            cache = open_cache(locate(cfg))
            fp = fingerprint_of_cache(cache)
            took = seconds.get(str(cache.path))
            when = f"prepared in {took:.1f} s" if took is not None else "already prepared"
            print(f"{path}: {cfg.source}, tokenizer {cfg.tokenizer}: {fp['files']} files, "
                  f"{human(fp['bytes'])}B -> {human(fp['train_tokens'])} train + "
                  f"{human(fp['eval_tokens'])} eval tokens in {cache.path} ({when})")
    return 0


def _prepare_checked(path: str, plan: Plan, datas: list[dict[str, Any]],
                     workers: int | None) -> dict[str, float]:
    """Tokenize the file's sources, then draw a batch of each shape its trials use, as the
    sweep's pre-flight does: data too small for a batch is refused here, not by the sweep
    once its cache exists. A refusal removes the caches this call wrote and the folders it
    made for them (a cache there before the call stays). The seconds each cache this call
    wrote took, by its folder: the command says a cache is prepared only once it passed."""
    from mutransfer.data.cache import discard, remove_empty, tokens_root
    from mutransfer.data.config import DataConfig
    from mutransfer.data.preflight import prepare_caches
    from mutransfer.errors import UserError
    from mutransfer.paths import missing_folders

    roots = dict.fromkeys(tokens_root(DataConfig.model_validate(raw)) for raw in datas)
    made = [folder for root in roots for folder in missing_folders(root)]
    written: list[CacheRef] = []
    took: dict[str, float] = {}
    try:
        try:  # no "prepared" until the batches are drawn: a refusal removes the cache
            prepare_caches(datas, out=sys.stdout, workers=workers, written=written, took=took,
                           announce=False)
        except UserError as exc:
            raise UserError(f"{path}: data: {exc}") from None
        _check_batches(plan, path)
    except UserError:
        for ref in written:
            discard(ref)
        remove_empty(made)
        raise
    return took


def _check_batches(plan: Plan, path: str) -> None:
    """What `sweep` (or `check`) checks of the data before its first trial, in its words."""
    from mutransfer.commands.check_plan import check_transfer_data
    from mutransfer.commands.check_spec import is_check_file
    from mutransfer.sweep.run.driver import check_data_present

    if is_check_file(path):
        check_transfer_data(plan, path)
    else:
        check_data_present(plan)


def _plan(prepare, path: str):
    """The plan of a sweep file, or of a check file's transfer stage (its data is the
    coordinate stage's too), without its data checked (the caches are made here)."""
    from mutransfer.commands.check_spec import is_check_file

    if not is_check_file(path):
        return prepare(path, check_data=False)
    from mutransfer.commands.check_plan import transfer_plan
    from mutransfer.commands.check_spec import load_check

    return transfer_plan(load_check(path), path)
