"""Where the results of a report came from, read from the store: the sweep file as run, the
versions, hosts, corpus and environment fingerprints the trials recorded; and when, where and
by what the report was written. Two reports that disagree are compared on these."""

from __future__ import annotations

import json
import platform
import socket
import time
from collections.abc import Iterable

import pandas as pd

from mutransfer.analysis.core import Analysis
from mutransfer.results.store import Store, versions


def _distinct(values: Iterable[object]) -> list[dict]:
    out: list[dict] = []
    for v in values:
        if isinstance(v, str) and v:
            try:
                doc = json.loads(v)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc not in out:
                out.append(doc)
    return out


def _versions(doc: dict) -> str:
    git = f" (git {doc['git']})" if doc.get("git") else ""
    return ", ".join(f"{k} {doc[k]}" for k in ("mutransfer", "torch", "ray", "python")
                     if doc.get(k)) + git


def _count(value: object) -> str:
    """A count with thousands separators; anything else (a field a hand-edited store lacks,
    or text) as it is: the corpus JSON is user data, and its row must not stop the report."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}"
    return "?" if value is None else str(value)


def _corpus(doc: dict) -> str:
    if "files" not in doc:
        return ", ".join(f"{k} {v}" for k, v in doc.items())
    return (f"{doc.get('source')} at {doc.get('root')}: {doc['files']} files, "
            f"{_count(doc.get('bytes'))} bytes, content hash {doc.get('hash')}; tokenizer "
            f"{doc.get('tokenizer')}, {_count(doc.get('train_tokens'))} train + "
            f"{_count(doc.get('eval_tokens'))} eval tokens")


def _env(doc: dict) -> str:
    keys = ("cpu", "cpus_usable", "torch_threads", "torch_interop_threads", "cpu_capability",
            "mkl", "flush_denormal", "gpu", "cuda", "numpy", "OMP_NUM_THREADS", "platform")
    return ", ".join(f"{k} {doc[k]}" for k in keys if doc.get(k) is not None)


def column(trials: pd.DataFrame, name: str) -> list[dict]:
    return _distinct(trials[name]) if name in trials else []


def provenance(a: Analysis) -> list[tuple[str, str]]:
    """(label, text) rows; a row per distinct value where the trials differ."""
    trials = a.prepared.trials
    rows: list[tuple[str, str]] = []
    for label, name, fmt in (("versions", "versions", _versions), ("corpus", "corpus", _corpus),
                             ("environment", "env", _env)):
        found = column(trials, name)
        for i, doc in enumerate(found):
            tag = f" ({i + 1} of {len(found)}: results differ across them)" if len(found) > 1 \
                else ""
            rows.append((label + tag, fmt(doc)))
        if not found:
            rows.append((label, "not recorded (results of an older version)"))
    if "host" in trials:
        hosts = sorted({str(h) for h in trials["host"].dropna()})
        rows.append(("hosts", ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more"
                                                      if len(hosts) > 8 else "")))
    me = json.loads(versions())
    rows.append(("report", f"written {time.strftime('%Y-%m-%d %H:%M:%S %Z')} on "
                           f"{socket.gethostname()} ({platform.platform()}) by "
                           f"{_versions(me)}"))
    return rows


def sweep_file(a: Analysis) -> str | None:
    """The sweep file as run (the store's sweep.yaml), when the store has one."""
    try:
        return Store(a.results_dir).read_text("sweep.yaml")
    except Exception:  # an unreachable URI, an old store: no file to show
        return None
