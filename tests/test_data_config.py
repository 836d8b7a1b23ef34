"""DataConfig: defaults, one-line errors naming the field, and fields the source must use."""

from __future__ import annotations

import pytest

from mutransfer.configbase import validate
from mutransfer.data import DataConfig
from mutransfer.errors import UserError


def error(data: dict) -> str:
    with pytest.raises(UserError) as err:
        validate(DataConfig, data, "data")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_default_is_the_offline_stdlib_corpus_in_bytes():
    cfg = DataConfig()
    assert (cfg.source, cfg.tokenizer, cfg.text_column) == ("stdlib", "byte", "text")


def test_unknown_source_names_the_field():
    assert error({"source": "wikipedia"}).startswith("data: source: Input should be 'stdlib'")


def test_paths_are_required_where_read_and_refused_where_not():
    assert "path is required for source parquet" in error({"source": "parquet"})
    assert "path is required for source text" in error({"source": "text"})
    assert "path is not used by source stdlib" in error({"path": "x"})


@pytest.mark.parametrize("data,field", [
    ({"source": "synthetic", "tokenizer": "gpt2"}, "tokenizer"),
    ({"source": "synthetic", "task": "copy", "tau": 3.0}, "tau"),
    ({"source": "synthetic", "task": "memory", "copy_len": 3}, "copy_len"),
    ({"source": "text", "path": "x", "dataset": "a/b"}, "dataset"),
    ({"source": "stdlib", "text_column": "body"}, "text_column"),
])
def test_a_field_the_source_does_not_read_is_an_error(data, field):
    assert f"{field} is not used by source" in error(data)


def test_value_checks():
    assert "eval_fraction" in error({"eval_fraction": 1.5})
    assert "tokenizer" in error({"tokenizer": "../etc/passwd"})
    assert "rho" in error({"source": "synthetic", "rho": "gauss"})


@pytest.mark.parametrize("data", [
    {}, {"source": "parquet", "path": "shards/*.parquet"}, {"source": "hf", "max_files": 2},
    {"source": "text", "path": "wiki.train.raw", "tokenizer": "gpt2"},
    {"source": "synthetic", "rho": "osc", "omega": 0.1}, {"source": "synthetic", "task": "copy"},
])
def test_a_dumped_config_validates_again(data):
    cfg = DataConfig.model_validate(data)
    assert DataConfig.model_validate(cfg.model_dump()) == cfg
