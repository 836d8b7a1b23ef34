"""Config of data sources (`data:` in a trial or sweep file).

One flat model for every source; a field that the chosen source does not read must keep its
default (a `path:` under `source: stdlib` is a mistake, not something to ignore silently).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mutransfer.configbase import StrictModel

Source = Literal["stdlib", "parquet", "hf", "text", "synthetic"]
TEXT_SOURCES = ("stdlib", "parquet", "hf", "text")

# field -> the (source, synthetic task) contexts that read it; task None: any task
_USED_BY: dict[str, tuple[tuple[str, str | None], ...]] = {
    "path": (("parquet", None), ("text", None)),
    "tokenizer": tuple((s, None) for s in TEXT_SOURCES),
    "eval_fraction": tuple((s, None) for s in TEXT_SOURCES),
    "split_seed": tuple((s, None) for s in TEXT_SOURCES),
    "text_column": (("parquet", None), ("hf", None)),
    **{f: (("hf", None),) for f in ("dataset", "config", "files", "max_files", "revision")},
    "cache_dir": tuple((s, None) for s in TEXT_SOURCES),
    "task": (("synthetic", None),),
    **{f: (("synthetic", "memory"),) for f in ("rho", "tau", "power", "omega", "horizon",
                                               "normalize")},
    **{f: (("synthetic", "copy"),) for f in ("n_symbols", "copy_len", "lag")},
}


class DataConfig(StrictModel):
    """Where the sequences of a trial come from. Sources: mutransfer/data/__init__.py."""

    source: Source = "stdlib"
    # parquet: a glob of shards or a directory; text: a file, a directory or a glob
    path: str | None = None
    # "byte", a tiktoken encoding name (gpt2, cl100k_base, ...) or the path of a Hugging Face
    # tokenizers JSON file (path/to/tokenizer.json); tiktoken and tokenizers: the `data` extra
    tokenizer: str = Field("byte", pattern=r"^([A-Za-z0-9_.\-]+|[^\n]+\.json)$")
    eval_fraction: float = Field(0.05, gt=0, lt=1)  # share of files / documents held out
    split_seed: int = 0  # a different seed holds out different files / documents
    text_column: str = Field("text", min_length=1)
    # hf: a dataset repo with Parquet files, fetched into cache_dir
    dataset: str = Field("HuggingFaceFW/fineweb", pattern=r"^[\w.\-]+/[\w.\-]+$")
    config: str = Field("sample-10BT", min_length=1)  # the dataset card's config_name
    files: str | None = None  # glob inside the repo; default: the config's data_files
    max_files: int | None = Field(None, ge=1)  # fetch only the first N matching files
    revision: str | None = None
    # Where downloads (hf: <cache_dir>/<dataset>) and the token cache (<cache_dir>/tokens) go;
    # default $MUTRANSFER_DATA_DIR, else ~/.cache/mutransfer (hf files then under hf/). On a
    # cluster: a path every node shares, so that the corpus is tokenized once
    cache_dir: str | None = None
    # synthetic
    task: Literal["memory", "copy"] = "memory"
    rho: Literal["exp", "poly", "osc"] = "exp"  # memory kernel rho(k)
    tau: float = Field(16.0, gt=0)  # exp, osc: rho(k) = exp(-k / tau) [cos(omega k)]
    power: float = Field(1.0, gt=0)  # poly: rho(k) = (k + 1)^-power
    omega: float = Field(0.4, ge=0)  # osc: radians per step
    horizon: int | None = Field(None, ge=0)  # K, the last lag summed; None: seq_len - 1
    normalize: bool = True  # scale rho so that sum_k rho(k)^2 = 1 (targets of unit variance)
    n_symbols: int = Field(8, ge=2)  # copy: alphabet size (vocab = n_symbols + 2)
    copy_len: int = Field(10, ge=1)  # copy: symbols to remember
    lag: int | None = Field(None, ge=0)  # copy: blanks before the delimiter; None: fill seq_len

    @model_validator(mode="after")
    def _fields_fit_source(self) -> DataConfig:
        if self.source in ("parquet", "text") and not self.path:
            raise ValueError(f"path is required for source {self.source}")
        for name, contexts in _USED_BY.items():
            if getattr(self, name) == type(self).model_fields[name].default:
                continue
            if not any(s == self.source and t in (None, self.task) for s, t in contexts):
                where = f" task {self.task}" if self.source == "synthetic" else ""
                raise ValueError(f"{name} is not used by source {self.source}{where}")
        return self
