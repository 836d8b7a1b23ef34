"""Config of data sources (`data:` in a trial or sweep file)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mutransfer.configbase import StrictModel


class DataConfig(StrictModel):
    source: Literal["stdlib", "parquet", "hf", "text", "synthetic"] = "stdlib"
    path: str | None = None  # parquet: a glob of shards; text: a file, directory or glob
    tokenizer: str = "byte"  # "byte" or a tiktoken encoding name
    eval_fraction: float = Field(0.05, gt=0, lt=1)
    split_seed: int = 0
