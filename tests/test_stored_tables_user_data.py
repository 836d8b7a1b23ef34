"""What a store's user data can hold does not break the analysis's output: a table column of
mixed Python types keeps its missing values missing when written (not the text "nan"), and a
hand-edited `corpus` JSON without some of its fields still gives a provenance row."""

import contextlib
import json
import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from mutransfer.analysis import analyze
from mutransfer.analysis.provenance import provenance
from mutransfer.analysis.write import write_table
from tests.synthetic_sweeps import Planted, synthetic_tables, write_results

LRS = [2.0**k for k in range(-9, -3)]


def _string_inference(on: bool):
    """pandas's text inference on (pandas 3's default: astype(str) keeps NaN) or off (pandas 2's
    default, which pyproject allows: astype(str) writes "nan"); the option's deprecation
    warning silenced."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(pd.option_context("future.infer_string", on))
    return stack


@pytest.mark.parametrize("infer_string", [True, False], ids=["pandas-3-text", "pandas-2-text"])
def test_a_mixed_column_written_keeps_a_missing_value_missing(tmp_path, infer_string):
    df = pd.DataFrame({"axis": pd.Series([1.5, "unset", None, np.nan], dtype=object),
                       "loss": [1.0, 2.0, 3.0, 4.0]})
    with _string_inference(infer_string):
        parquet, csv = write_table(df, tmp_path / "t")
    stored = pq.read_table(parquet).column("axis").to_pylist()
    assert stored == ["1.5", "unset", None, None]  # not "None" and "nan"
    assert pd.read_csv(csv, keep_default_na=False)["axis"].tolist() == ["1.5", "unset", "", ""]


def _store(tmp_path, corpus: dict):
    t = synthetic_tables([Planted("sp", 2.0**-6, -0.5)], [32, 64], LRS, [0, 1])
    t.trials["corpus"] = json.dumps(corpus)
    return write_results(tmp_path, t)


def test_a_corpus_without_bytes_or_train_tokens_still_gives_a_provenance_row(tmp_path):
    corpus = {"source": "stdlib", "root": "/usr/lib", "files": 734, "hash": "ab12",
              "tokenizer": "byte", "eval_tokens": 773_100}  # hand-edited: two fields gone
    rows = dict(provenance(analyze(_store(tmp_path, corpus))))
    assert rows["corpus"] == ("stdlib at /usr/lib: 734 files, ? bytes, content hash ab12; "
                              "tokenizer byte, ? train + 773,100 eval tokens")


def test_a_corpus_count_written_as_text_is_shown_as_it_is(tmp_path):
    corpus = {"source": "stdlib", "root": "/usr/lib", "files": 734, "bytes": "12 MB",
              "hash": "ab12", "tokenizer": "byte", "train_tokens": 11_300_000,
              "eval_tokens": None}
    rows = dict(provenance(analyze(_store(tmp_path, corpus))))
    assert rows["corpus"] == ("stdlib at /usr/lib: 734 files, 12 MB bytes, content hash ab12; "
                              "tokenizer byte, 11,300,000 train + ? eval tokens")
