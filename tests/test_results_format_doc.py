"""docs/results-format.md is the contract outside readers code against: its tables of the
trials and steps columns are the Arrow schemas (mutransfer/results/schema.py), every column
the analysis stores is named in it, and the stored analysis tables have the types it gives."""

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mutransfer.analysis import analyze, write_analysis
from mutransfer.results.schema import STEP_SCHEMA, trial_schema
from tests.synthetic_axes import axes_tables
from tests.synthetic_sweeps import write_results

DOC = Path(__file__).resolve().parents[1] / "docs" / "results-format.md"
TYPES = {"str": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
LR_GRID = [2.0**e for e in np.arange(-12, -5.9, 0.5)]


def _section(title: str) -> str:
    """The doc's text from the heading `title` to the next heading of its level or above."""
    text = DOC.read_text(encoding="utf-8")
    level = title.split(" ")[0]
    start = text.index(title + "\n")
    end = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(title):], re.M)
    return text[start:start + len(title) + end.start()] if end else text[start:]


def _doc_columns(title: str) -> list[tuple[str, pa.DataType]]:
    """(column, type) per row of the first Markdown table under `title`, a row naming several
    columns (`tau_embedding, tau_hidden, ...`) expanded, the extra axes' row left out."""
    out = []
    for line in _section(title).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) < 2 or cells[0] in ("column", "---"):
            continue
        if cells[0].startswith("("):  # "(one column per extra axis)"
            continue
        typ = TYPES[cells[1].split(" ")[0]]
        out += [(name.strip(), typ) for name in cells[0].split(",")]
    return out


def test_the_docs_trials_table_is_the_trials_schema_column_for_column_in_order():
    schema = trial_schema()
    assert _doc_columns("## `trials`") == list(zip(schema.names, schema.types))


def test_the_docs_steps_table_is_the_steps_schema_column_for_column_in_order():
    assert _doc_columns("## `steps`") == list(zip(STEP_SCHEMA.names, STEP_SCHEMA.types))


def _law(p: dict) -> float:
    return 2**-9 * (p["width"] / 64) ** -1.0 * (p["model.n_layer"] / 2) ** -0.5


@pytest.fixture(scope="module")
def analysis_dir(tmp_path_factory) -> Path:
    """Every table the analysis stores (width x depth: the scale tables and the law too)."""
    t = axes_tables({"width": [64, 128, 256], "model.n_layer": [2, 4]}, "lr", LR_GRID, _law,
                    [0, 1])
    root = write_results(tmp_path_factory.mktemp("planted"), t)
    out = root / "analysis"
    write_analysis(analyze(root), out)
    return out


def test_every_column_the_analysis_stores_is_named_in_the_docs_analysis_sections(analysis_dir):
    text = DOC.read_text(encoding="utf-8")
    doc = _section("## Analysis tables (`analysis/`)") + \
        _section("## Any hyperparameter against any scale axes (target, scale, the law)")
    prose = re.sub(r"```.*?```", "", doc, flags=re.S)  # a fence's backticks pair off wrongly
    named = set(re.findall(r"`([^`]+)`", prose))
    keys = {"parameterization", "width", "model.n_layer"}  # the key columns, named by axis
    stems = sorted(p.stem for p in analysis_dir.glob("*.parquet"))
    assert {"law", "law_points", "law_holdout", "scale_drift", "scale_regret"} <= set(stems)
    missing = {stem: [c for c in pq.read_schema(analysis_dir / f"{stem}.parquet").names
                      if c not in keys and c not in named]
               for stem in stems}
    assert {s: cols for s, cols in missing.items() if cols} == {}
    assert all(f"`{stem}`" in text for stem in stems)


def test_the_analysis_stores_text_as_arrow_string_whatever_pandas_hands_over(analysis_dir):
    """pandas 3 gives Arrow `large_string`; the doc says `string`, as in the trials table."""
    types = {(p.stem, f.name): f.type for p in analysis_dir.glob("*.parquet")
             for f in pq.read_schema(p)}
    text = {k for k, t in types.items() if pa.types.is_string(t) or pa.types.is_large_string(t)}
    assert ("lr_opt", "note") in text and ("cells", "status") in text
    assert {k: str(types[k]) for k in text if types[k] != pa.string()} == {}
