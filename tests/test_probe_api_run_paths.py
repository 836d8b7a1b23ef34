"""The Python API's run paths with valid but unusual input, as a notebook or a script uses them
(found by probing `mutransfer.run` and its helpers)."""

from __future__ import annotations

from mutransfer.statusline import StatusLine
from mutransfer.sweep.run.progress import Progress


class WriteOnly:
    """A writer with a `write` only (a logger's adapter, a notebook widget's writer): what
    `mutransfer.run(out=...)` accepts (driver.check_out asks for `write` alone)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return len(text)


def test_progress_line_writes_to_a_stream_with_only_write():
    out = WriteOnly()
    progress = Progress(2, out=out)  # before: AttributeError 'WriteOnly' has no 'isatty',
    progress.started("a")  # raised after Ray had started and the trials were set up
    progress.finished("a", "complete")
    progress.close()
    text = "".join(out.parts)
    assert not StatusLine(out).tty  # no isatty: not a terminal, one line per drawing
    assert "[1/2] done 1" in text and "\r" not in text


def test_run_refuses_a_binary_out_stream_before_writing(tmp_path):
    """A file opened with 'wb' (or io.BytesIO) has a `write`: it was taken, and the run
    failed with TypeError 'a bytes-like object is required' at its header, its store
    already created."""
    import io

    import pytest

    import mutransfer
    from mutransfer.errors import UserError

    spec = {"name": "binary", "model": {"n_layer": 1, "d_state": 4, "base_width": 16},
            "train": {"steps": 3, "batch_size": 2, "seq_len": 16, "eval_every": 3},
            "axes": {"width": [16], "lr": [0.01]}}
    store = tmp_path / "store"
    with open(tmp_path / "log.bin", "wb") as binary_file:
        for out in (io.BytesIO(), binary_file):
            with pytest.raises(UserError, match="out: a binary stream"):
                mutransfer.run(spec, storage=store, num_cpus=1, out=out)
            assert not store.exists()


def test_run_refuses_a_model_factory_that_does_not_import_before_writing(tmp_path):
    """`mutransfer sweep` refused it in one line; `mutransfer.run` created the store, started
    Ray and returned a SweepResult with every trial failed."""
    import pytest

    import mutransfer
    from mutransfer.errors import UserError
    from tests.sweeps import tiny_sweep

    spec = tiny_sweep("fac", {"width": [16, 32], "lr": [0.01]}, storage=str(tmp_path / "s"))
    spec["model"] = {"arch": "nomod_mutransfer_probe.sub:f", "base_width": 16}
    with pytest.raises(UserError, match="cannot import nomod_mutransfer_probe"):
        mutransfer.run(spec, num_cpus=1)
    assert not (tmp_path / "s").exists()
