"""A Hugging Face dataset of Parquet files (default FineWeb sample-10BT), cached, read as parquet.

Files live in `<cache_dir>/<owner>/<name>/` with the repo's own layout (what
`snapshot_download(local_dir=...)` writes), e.g.
`<cache_dir>/HuggingFaceFW/fineweb/sample/10BT/000_00000.parquet`.
Which files: `data.files` (a glob inside the repo), else the config's `data_files` in the
dataset card (README.md), else the FineWeb layout (sample-10BT -> sample/10BT/*, default ->
data/*/*, a dump name -> data/<dump>/*). Files already in the cache are used as they are,
without importing huggingface_hub (so it works offline); otherwise they are fetched.
The split hashes paths relative to the pattern's fixed folder (sample/10BT/ for sample-10BT):
the same split as `source: parquet` on that glob, wherever the cache is.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

import yaml

from mutransfer.data.config import DataConfig
from mutransfer.data.files import FileSet, data_dir, static_root, visible
from mutransfer.data.parquet import ParquetSource, parquet_source
from mutransfer.errors import DataMissing, UserError, first_line
from mutransfer.paths import missing_folders


def default_cache_dir() -> Path:
    return data_dir() / "hf"


def local_dir(cfg: DataConfig) -> Path:
    base = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    return base / cfg.dataset


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A repo glob as in data_files: `*` and `?` stay within one folder, `**` crosses them."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            c = pattern[i]
            out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
            i += 1
    return re.compile("".join(out))


def _card_patterns(card: str, config: str) -> list[str] | None:
    """data_files of `config` in a dataset card's YAML header; None when the card has none."""
    match = re.match(r"---\s*\n(.*?)\n---\s*(\n|$)", card, re.S)
    try:
        header = yaml.safe_load(match.group(1)) if match else None
    except yaml.YAMLError:
        return None
    configs = header.get("configs") if isinstance(header, dict) else None
    if not isinstance(configs, list):
        return None
    for entry in configs:
        if isinstance(entry, dict) and entry.get("config_name") == config:
            files = entry.get("data_files", [])
            items = files if isinstance(files, list) else [files]
            patterns: list[str] = []
            for item in items:  # a glob, or {split, path} with path a glob or a list of them
                paths = item.get("path", []) if isinstance(item, dict) else item
                if isinstance(item, dict) and item.get("split") not in (None, "train"):
                    continue
                patterns += paths if isinstance(paths, list) else [paths]
            return [str(p) for p in patterns]
    names = [e.get("config_name") for e in configs if isinstance(e, dict)]
    raise UserError(f"hf: the dataset card has no config {config!r} (configs: "
                    f"{', '.join(map(str, names))}); set data.config or data.files")


def fineweb_patterns(config: str) -> list[str]:
    if config == "default":
        return ["data/*/*.parquet"]
    if config.startswith("sample-"):
        return [f"sample/{config.removeprefix('sample-')}/*.parquet"]
    return [f"data/{config}/*.parquet"]


def repo_patterns(cfg: DataConfig, local: Path) -> list[str]:
    if cfg.files:
        return [cfg.files]
    readme = local / "README.md"
    if readme.is_file():
        found = _card_patterns(readme.read_text(errors="replace"), cfg.config)
        if found:
            return found
    return fineweb_patterns(cfg.config)


def match_files(names: list[str], patterns: list[str], max_files: int | None) -> list[str]:
    """Sorted Parquet names matching any pattern, the first max_files of them."""
    regexes = [glob_regex(p) for p in patterns]
    chosen = sorted(n for n in names if n.endswith(".parquet")
                    and any(r.fullmatch(n) for r in regexes))
    return chosen[:max_files] if max_files else chosen


def local_files(local: Path, patterns: list[str], max_files: int | None) -> list[str]:
    if not local.is_dir():
        return []
    names = [p.relative_to(local).as_posix() for p in local.rglob("*.parquet")
             if visible(p, local)]
    return match_files(names, patterns, max_files)


def _names_root(local: Path, patterns: list[str]) -> Path:
    """The folder the split names files from: the patterns' fixed part, so that the split is
    the one `source: parquet` gives with `path: <local>/<pattern>`."""
    roots = [str(static_root(p)) for p in patterns]
    return local / os.path.commonpath(roots) if roots else local


def _fetch(cfg: DataConfig, local: Path, patterns: list[str]) -> list[str]:
    """Download the matching files into `local`; returns their repo paths."""
    import huggingface_hub as hub

    kw = {"repo_type": "dataset", "revision": cfg.revision}
    if not cfg.files and not (local / "README.md").is_file():
        hub.hf_hub_download(cfg.dataset, "README.md", local_dir=local, **kw)
        patterns = repo_patterns(cfg, local)
    names = hub.HfApi().list_repo_files(cfg.dataset, **kw)
    chosen = match_files(names, patterns, cfg.max_files)
    if not chosen:
        raise DataMissing(f"hf: no Parquet files of {cfg.dataset} match {', '.join(patterns)}; "
                        "set data.files")
    hub.snapshot_download(cfg.dataset, allow_patterns=chosen, local_dir=local, **kw)
    return chosen


def _remove_failed(local: Path, created: list[Path], had_card: bool) -> None:
    """After a failed fetch into `local`, what it wrote, unless a Parquet file came (a download
    cut short keeps what it got, which the next fetch resumes): the hub's bookkeeping
    (.cache/), the dataset card when it was not there before, then those of the folders it
    created (`created`, deepest first) that are empty. A refused dataset (offline, an unknown
    repo, no access, no matching files) left <cache_dir>/<owner>/<name>/.cache/huggingface/
    with a lock file."""
    if local.is_dir() and any(local.rglob("*.parquet")):
        return
    if local / ".cache" in created:
        shutil.rmtree(local / ".cache", ignore_errors=True)
    if not had_card:
        (local / "README.md").unlink(missing_ok=True)
    for folder in created:  # deepest first; one holding another process's files stays
        with contextlib.suppress(OSError):
            folder.rmdir()


def _where(local: Path, patterns: list[str]) -> str:
    globs = ", ".join(str(local / p) for p in patterns)
    return f"place the Parquet files as {globs} (the same as source: parquet, path: that glob)"


def load_hf(cfg: DataConfig) -> ParquetSource:
    return parquet_source("hf", hf_files(cfg), cfg, prefix=hf_prefix(cfg))


def hf_prefix(cfg: DataConfig) -> str:
    return f"{cfg.dataset} {cfg.config}, "


def hf_files(cfg: DataConfig) -> FileSet:
    """The dataset's Parquet files in the cache, fetched first when they are not there."""
    local = local_dir(cfg)
    patterns = repo_patterns(cfg, local)
    names = local_files(local, patterns, cfg.max_files)
    enough = len(names) >= (cfg.max_files or 1)
    if not enough:
        # some files there, fewer than max_files: say so (before, only that the dataset is
        # not there and where to place its files, which the user had done for these)
        have = (f" ({len(names)} of the max_files {cfg.max_files} matching files are there: "
                f"lower max_files to use them)" if names else "")
        try:
            import huggingface_hub  # noqa: F401  (optional dependency)
        except ImportError:
            missing = "has too few files" if names else "is not"
            raise UserError(f"hf: {cfg.dataset} {missing} in {local}{have} and "
                            f"huggingface_hub is not installed: pip install 'mutransfer[hf]', "
                            f"or {_where(local, patterns)}") from None
        # the hub's bookkeeping goes to local/.cache: what a failed fetch removes again
        created, had_card = missing_folders(local / ".cache"), (local / "README.md").exists()
        try:
            names = _fetch(cfg, local, patterns)
        except UserError:
            _remove_failed(local, created, had_card)
            raise
        except Exception as exc:  # offline, unknown repo, no access: all end the same way
            _remove_failed(local, created, had_card)
            reason = first_line(exc)[:160]
            raise UserError(f"hf: could not fetch {cfg.dataset} ({type(exc).__name__}: "
                            f"{reason}){have}; offline, {_where(local, patterns)}") from None
    return FileSet(root=_names_root(local, patterns), files=tuple(local / n for n in names))
