"""Malformed local data: one UserError naming the file and the problem, and no token cache
written that a later run would read; data fixed afterwards is tokenized anew."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mutransfer.data import DataConfig, load_data
from mutransfer.data.preflight import check_batches, prepare_caches
from mutransfer.data.splits import rows_in_eval
from mutransfer.errors import UserError

TEXT = "some ordinary text, line after line.\n" * 40


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data-dir"
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(folder))
    return folder


def caches(data_dir: Path) -> list[str]:
    """Every entry of the token cache folder, hidden ones (preparers' folders) included."""
    root = data_dir / "tokens"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def refused_everywhere(cfg: DataConfig, data_dir: Path, words: str) -> None:
    """validate (in memory), prepare and a trial (cache use) all refuse, saying `words`,
    before anything is announced, and leave no cache nor a folder made for one."""
    with pytest.raises(UserError, match=words):
        check_batches(cfg, [(2, 16)])
    out = io.StringIO()
    with pytest.raises(UserError, match=words):
        prepare_caches([cfg.model_dump()], out=out, workers=1)
    assert out.getvalue() == ""  # one error line, no "preparing ..." before it
    with pytest.raises(UserError, match=words):
        load_data(cfg)
    assert not data_dir.exists()  # not even the folders a cache would have gone into


@pytest.mark.parametrize("encoding,name", [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_text_file_is_refused_naming_its_encoding(tmp_path, data_dir,
                                                                    encoding, name):
    # read as bytes, every other byte of UTF-16 ASCII is NUL: the byte tokenizer's end-of-text
    path = tmp_path / "wide.txt"
    path.write_bytes(TEXT.encode(encoding))  # with its byte-order mark
    refused_everywhere(DataConfig(source="text", path=str(path)), data_dir,
                       f"wide.txt: {name} text .*convert it to UTF-8")


def test_a_text_file_holding_nul_bytes_is_refused_naming_the_offset(tmp_path, data_dir):
    path = tmp_path / "blob.txt"
    path.write_bytes(b"abc\0def" * 100)
    refused_everywhere(DataConfig(source="text", path=str(path)), data_dir,
                       "blob.txt: a NUL byte at offset 3: not text")


def test_a_nul_byte_in_one_file_of_a_folder_names_that_file(tmp_path, data_dir):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i in range(4):
        (folder / f"doc{i}.txt").write_text(TEXT)
    (folder / "doc2.txt").write_bytes(TEXT.encode() + b"\0")
    refused_everywhere(DataConfig(source="text", path=str(folder)), data_dir,
                       "doc2.txt: a NUL byte")


def test_latin1_bytes_are_byte_tokens_not_an_error(tmp_path, data_dir):
    path = tmp_path / "latin.txt"
    path.write_bytes(("caf\xe9 na\xefve r\xe9sum\xe9. " * 40).encode("latin-1"))
    source = load_data(DataConfig(source="text", path=str(path)))
    assert source.buffers["train"].tobytes().startswith(b"caf\xe9 na\xefve")


def test_an_unreadable_text_file_is_one_line_naming_it(tmp_path, data_dir, monkeypatch):
    # chmod 000 does not stop root: the read itself is made to fail as it would for a user
    path = tmp_path / "secret.txt"
    path.write_text(TEXT)
    real = Path.read_bytes

    def denied(self):
        if self.name == "secret.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    refused_everywhere(DataConfig(source="text", path=str(path)), data_dir,
                       "secret.txt: cannot read it \\(Permission denied\\)")


def test_a_text_file_fixed_after_a_refusal_is_tokenized_anew(tmp_path, data_dir):
    path = tmp_path / "wide.txt"
    path.write_bytes(TEXT.encode("utf-16"))
    cfg = DataConfig(source="text", path=str(path))
    with pytest.raises(UserError):
        prepare_caches([cfg.model_dump()], workers=1)
    path.write_text(TEXT)  # converted to UTF-8
    prepare_caches([cfg.model_dump()], workers=1)
    source = load_data(cfg)
    tokens = bytes(source.buffers["train"]) + bytes(source.buffers["eval"])
    assert tokens == TEXT.encode() + b"\0"


def test_a_text_column_of_nulls_only_is_refused_before_tokenizing(tmp_path, data_dir):
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": pa.array([None] * 200, pa.string())}), path,
                   row_group_size=50)
    refused_everywhere(DataConfig(source="parquet", path=str(path)), data_dir,
                       "nulls.parquet: every 'text' value is null \\(200 rows\\)")


def test_a_split_whose_texts_are_all_null_writes_no_cache(tmp_path, data_dir):
    # rows fall in both splits, but every eval row's text is null: a cache of 0 eval tokens
    # could never give an eval batch
    n = 200
    is_eval = rows_in_eval("half.parquet", 0, 0, n, 0.05)
    texts = [None if e else f"document {i}, some words." for i, e in enumerate(is_eval)]
    path = tmp_path / "half.parquet"
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), path)
    cfg = DataConfig(source="parquet", path=str(path))
    with pytest.raises(UserError, match="the eval split has no text"):
        prepare_caches([cfg.model_dump()], workers=1)
    with pytest.raises(UserError, match="the eval split has no text"):
        load_data(cfg)
    assert caches(data_dir) == []


def test_a_text_column_with_some_nulls_trains_on_the_rest(tmp_path, data_dir):
    texts = [None] * 100 + [f"document {i}, some words." for i in range(100)]
    path = tmp_path / "some.parquet"
    pq.write_table(pa.table({"text": pa.array(texts, pa.string())}), path, row_group_size=100)
    cfg = DataConfig(source="parquet", path=str(path))
    check_batches(cfg, [(2, 16)])
    prepare_caches([cfg.model_dump()], workers=1)
    check_batches(cfg, [(2, 16)])


def test_a_cache_dir_that_is_a_file_says_so_not_that_the_cache_is_damaged(tmp_path):
    not_a_folder = tmp_path / "cache-file"
    not_a_folder.write_text("")
    text = tmp_path / "ok.txt"
    text.write_text(TEXT)
    cfg = DataConfig(source="text", path=str(text), cache_dir=str(not_a_folder))
    check_batches(cfg, [(2, 16)])  # validate: tokenized in memory, nothing to write
    with pytest.raises(UserError, match="cannot create .*cache-file/tokens .*set "
                                        "data.cache_dir to a writable folder") as info:
        load_data(cfg)
    assert "prepare it again" not in str(info.value)


def test_a_dictionary_encoded_text_column_reads_as_its_strings(tmp_path, data_dir):
    # what pandas writes for a categorical column: the same texts, the same tokens
    texts = [f"document {i % 7}, some words." for i in range(200)]
    plain, coded = tmp_path / "plain" / "a.parquet", tmp_path / "coded" / "a.parquet"
    for path, column in ((plain, pa.array(texts)), (coded, pa.array(texts).dictionary_encode())):
        path.parent.mkdir()
        pq.write_table(pa.table({"text": column}), path, row_group_size=50)
    streams = [load_data(DataConfig(source="parquet", path=str(p)), cache="off")
               for p in (plain, coded)]
    cached = load_data(DataConfig(source="parquet", path=str(coded)))
    for split in ("train", "eval"):
        a, b, c = (next(s.batches(split, 2, 16, seed=0))[0] for s in (*streams, cached))
        assert a.equal(b) and a.equal(c)


def test_a_refused_source_leaves_not_even_the_folders_made_for_its_cache(tmp_path):
    cache_dir = tmp_path / "made" / "by" / "prepare"
    path = tmp_path / "wide.txt"
    path.write_bytes(TEXT.encode("utf-16"))
    cfg = DataConfig(source="text", path=str(path), cache_dir=str(cache_dir))
    with pytest.raises(UserError, match="UTF-16"):
        prepare_caches([cfg.model_dump()], workers=1)
    assert not (tmp_path / "made").exists()


def test_a_refused_source_keeps_the_folders_that_were_there(tmp_path, data_dir):
    (data_dir / "tokens").mkdir(parents=True)  # empty, but the user's
    path = tmp_path / "wide.txt"
    path.write_bytes(TEXT.encode("utf-16"))
    with pytest.raises(UserError, match="UTF-16"):
        prepare_caches([DataConfig(source="text", path=str(path)).model_dump()], workers=1)
    assert (data_dir / "tokens").is_dir() and caches(data_dir) == []


@pytest.fixture(scope="module")
def bpe_json(tmp_path_factory) -> str:
    """A tokenizers JSON file: a tokenizer of text, which decodes what it reads as UTF-8."""
    pytest.importorskip("tokenizers")
    from tests.bpe import train_bpe

    return str(train_bpe(tmp_path_factory.mktemp("bpe") / "tokenizer.json"))


def test_a_file_not_utf8_is_refused_for_a_tokenizer_of_text_naming_the_first_bad_byte(
        tmp_path, data_dir, bpe_json):
    # decoded with replacement, each latin-1 byte became U+FFFD: a corpus changed silently
    path = tmp_path / "latin.txt"
    path.write_bytes(("caf\xe9 na\xefve r\xe9sum\xe9. " * 40).encode("latin-1"))
    refused_everywhere(DataConfig(source="text", path=str(path), tokenizer=bpe_json), data_dir,
                       "latin.txt: not UTF-8 \\(byte 0xe9 at offset 3\\), which tokenizer "
                       ".*tokenizer.json reads; convert it to UTF-8")


def test_utf8_text_is_tokenized_as_its_text_by_a_tokenizer_of_text(tmp_path, data_dir,
                                                                   bpe_json):
    from mutransfer.data.tokenizers import make_tokenizer

    text = "café naïve résumé ✓ " * 40
    path = tmp_path / "utf8.txt"
    path.write_text(text, encoding="utf-8")
    source = load_data(DataConfig(source="text", path=str(path), tokenizer=bpe_json))
    tokens = [*source.buffers["train"].tolist(), *source.buffers["eval"].tolist()]
    assert tokens == make_tokenizer(bpe_json).encode_docs([text]).tolist()


def test_a_nul_byte_in_a_parquet_text_is_refused_naming_its_row(tmp_path, data_dir):
    # the byte tokenizer's end-of-text token: that document would be cut in two, silently
    texts = [f"document {i}, some words." for i in range(200)]
    texts[150] = "a document with a NUL\0byte in it"
    path = tmp_path / "nul.parquet"
    pq.write_table(pa.table({"text": texts}), path)
    cfg = DataConfig(source="parquet", path=str(path))
    words = ("nul.parquet: row 150 \\(in row group 0\\): its 'text' value holds a NUL byte, "
             "the byte tokenizer's end-of-text token; remove the NUL bytes")
    # found as the texts are tokenized (no pass over the data of its own), so after prepare
    # announced its work
    with pytest.raises(UserError, match=words):
        check_batches(cfg, [(2, 16)])
    with pytest.raises(UserError, match=words):
        prepare_caches([cfg.model_dump()], workers=1)
    with pytest.raises(UserError, match=words):
        load_data(cfg)
    assert not data_dir.exists()


def test_a_nul_byte_in_a_later_row_group_is_refused_when_the_cache_is_prepared(tmp_path,
                                                                                data_dir):
    texts = [f"document {i}, some words." for i in range(400)]
    texts[377] = "\0"
    path = tmp_path / "nul.parquet"
    pq.write_table(pa.table({"text": texts}), path, row_group_size=100)
    cfg = DataConfig(source="parquet", path=str(path))
    with pytest.raises(UserError, match="nul.parquet: row 377 \\(in row group 3\\)"):
        prepare_caches([cfg.model_dump()], workers=1)
    assert not data_dir.exists()
