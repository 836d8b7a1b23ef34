"""What a trial's data loader delivers: today's streaming path (tokenizing as it reads) against
the token cache (slices of memory maps), and what preparing the cache costs.

    python benchmarks/data_throughput.py [--mb 48] [--batches 300] [--bpe-vocab 8192]

Corpus: the standard library's .py files (the built-in corpus) written as Parquet shards of
one document per file, repeated until about --mb megabytes (8 shards). Tokenizers: bytes, and
a byte-level BPE trained here with the `tokenizers` package (offline; GPT-2's own file needs
the network). Per (tokenizer, path): tokens/s of `batches("train", 32, 512, seed)` (the
fineweb_width shape) over the first --batches batches of a fresh loader, opening included
(streaming: no row group counted or held yet). Also the stdlib source itself (held in
memory; its cache: memory maps). Target (issue 23): the cache at >= 50 x 1.9M tokens/s, the
rate an H100 trains a width-256 Mamba at, per process. The cache column includes verifying
each shard's checksum when it is first mapped (issue 31); the checksum column is that check
alone, over all the cache's shards (tokens/s: its bytes over the token size), paid once per
shard per process.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runs from a bare checkout too
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from mutransfer.data import DataConfig, load_data, parquet  # noqa: E402
from mutransfer.data.cache import file_checksum, locate, open_cache, shard_name  # noqa: E402
from mutransfer.data.preflight import prepare_caches  # noqa: E402
from mutransfer.data.stdlib import stdlib_files  # noqa: E402

H100_RATE = 1.9e6  # tokens/s an H100 trains a width-256 Mamba at (benchmarks/README.md)
TARGET = 50 * H100_RATE
BATCH, SEQ = 32, 512


def write_corpus(folder: Path, megabytes: float, shards: int = 8) -> Path:
    docs = [f.read_text(errors="replace") for f in stdlib_files().files]
    size = sum(len(d.encode()) for d in docs)
    copies = max(1, round(megabytes * 1e6 / size))
    rows = [d for _ in range(copies) for d in docs]
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(rows) // shards)
    for i in range(shards):
        pq.write_table(pa.table({"text": rows[i * per:(i + 1) * per]}),
                       folder / f"shard_{i:02d}.parquet", row_group_size=256)
    return folder


def rate(cfg: DataConfig, cache: str, batches: int) -> float:
    """Tokens/s of the first `batches` batches of a fresh loader, its opening included (the
    streaming path tokenizes a shuffle chunk of 2^20 tokens, 64 batches, at a time)."""
    parquet._COUNTS.clear()
    parquet._TOKENS.clear()
    load_data(cfg, cache=cache)  # the source object (file listing, cache lookup) is not timed
    start = time.perf_counter()
    it = load_data(cfg, cache=cache).batches("train", BATCH, SEQ, seed=0)
    for _ in range(batches):
        next(it)
    return batches * BATCH * SEQ / (time.perf_counter() - start)


def checksum_rate(cfg: DataConfig) -> tuple[float, float]:
    """(tokens/s, MB/s) of verifying every shard of `cfg`'s cache (read, hash, largest id)."""
    cache = open_cache(locate(cfg))
    start = time.perf_counter()
    tokens = 0
    for i, shard in enumerate(cache.index["shards"]):
        file_checksum(cache.path / shard_name(i), cache.dtype)
        tokens += int(shard["tokens"])
    seconds = time.perf_counter() - start
    return tokens / seconds, tokens * cache.dtype.itemsize / seconds / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=48)
    ap.add_argument("--batches", type=int, default=640, help="10 shuffle chunks")
    ap.add_argument("--bpe-vocab", type=int, default=8192)
    ap.add_argument("--workers", type=int, default=None, help="prepare's processes")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="data-throughput-"))
    os.environ["MUTRANSFER_DATA_DIR"] = str(tmp / "data-dir")  # a cold cache of its own
    corpus = write_corpus(tmp / "corpus", args.mb)
    mb = sum(p.stat().st_size for p in corpus.iterdir()) / 1e6
    from tests.bpe import train_bpe

    start = time.perf_counter()
    bpe = train_bpe(tmp / "bpe.json", vocab_size=args.bpe_vocab, n_files=300)
    print(f"corpus: {mb:.1f} MB of Parquet in 8 shards ({args.mb:g} MB of text asked); "
          f"BPE of {args.bpe_vocab} trained in {time.perf_counter() - start:.1f} s; "
          f"batches of {BATCH} x {SEQ}; {os.cpu_count()} CPUs")
    print("| source | tokenizer | prepare s | streaming tokens/s | cache tokens/s | "
          "cache / streaming | cache / target | checksum tokens/s (MB/s) | checksum / H100 |")
    print("|---|---|---|---|---|---|---|---|---|")
    cases = [("parquet", "byte", DataConfig(source="parquet", path=str(corpus))),
             ("parquet", "BPE", DataConfig(source="parquet", path=str(corpus),
                                           tokenizer=str(bpe))),
             ("stdlib", "byte", DataConfig())]
    for source, name, cfg in cases:
        start = time.perf_counter()
        prepare_caches([cfg.model_dump()], workers=args.workers)
        prep = time.perf_counter() - start
        stream = rate(cfg, "off", 192 if name == "BPE" else args.batches)  # BPE: 3 chunks
        cached = rate(cfg, "use", args.batches)
        check, mb_s = checksum_rate(cfg)
        print(f"| {source} | {name} | {prep:.1f} | {stream / 1e6:.2f}M | {cached / 1e6:.1f}M "
              f"| {cached / stream:.0f}x | {cached / TARGET:.2f} | {check / 1e6:.0f}M "
              f"({mb_s:.0f}) | {check / H100_RATE:.0f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
