"""`mutransfer train`: its --out never lands in a results store's tables, nor replaces its
config, nor is a folder's name; the result file gets the permissions of any other file; and a
Ctrl-C on a terminal ends the status line before the command says it was interrupted."""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from mutransfer.cli import main
from mutransfer.commands.outputs import write_result
from mutransfer.results.store import MARKER
from mutransfer.statusline import CLEAR

ROOT = Path(__file__).parent.parent
CONFIG = str(ROOT / "configs" / "train.yaml")
TINY = ["--set", "width=64", "--set", "train.steps=4", "--set", "train.eval_every=2",
        "--set", "train.batch_size=2", "--set", "train.seq_len=32"]


def a_store(root: Path) -> Path:
    """A results store's folders and marker, with one (stand-in) part in trials/."""
    for folder in ("trials", "steps", "running"):
        (root / folder).mkdir(parents=True)
    (root / MARKER).write_text('{"format": 1}\n')
    (root / "trials" / "part-abc.parquet").write_bytes(b"PAR1 stand-in")
    return root


@pytest.mark.parametrize("name", ["trials/part-abc.parquet", "steps/new.json",
                                  "running/sub/x.json"])
def test_an_out_inside_a_stores_tables_is_refused_before_training(tmp_path, capsys, name):
    """Before: the trial ran and its JSON replaced a part of the store (or sat beside its
    parts), read as a damaged part by every later analysis."""
    store = a_store(tmp_path / "store")
    (store / "running" / "sub").mkdir()
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert main(["train", CONFIG, *TINY, "--out", str(store / name)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert f"inside the results folder's {name.split('/')[0]}/ (of {store})" in err
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_an_out_beside_a_store_is_written(tmp_path, capsys):
    store = a_store(tmp_path / "store")
    assert main(["train", CONFIG, *TINY, "--out", str(store / "result.json")]) == 0
    assert (store / "result.json").is_file()


class CtrlCTerminal(io.StringIO):
    """A terminal as stderr that gets a Ctrl-C (a real SIGINT) while a status line starting
    with `at` is drawn on it (at the next write after it), as from a user at the keyboard."""

    def __init__(self, at: str) -> None:
        super().__init__()
        self.at, self.seen, self.pressed = CLEAR + at, False, False

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.seen and not self.pressed:
            self.pressed = True
            signal.raise_signal(signal.SIGINT)
        self.seen = self.seen or text.startswith(self.at)
        return super().write(text)

    def screen(self) -> list[str]:
        """The lines as a terminal shows them: each one's text after its last erasure."""
        return [line.rsplit(CLEAR, 1)[-1] for line in self.getvalue().split("\n")]


@pytest.mark.parametrize("at", ["[", "preparing the token cache"],
                         ids=["trial's progress", "token cache's progress"])
def test_a_ctrl_c_on_a_terminal_says_interrupted_on_a_line_of_its_own(
        monkeypatch, tmp_path, at):
    """Before: the status line drawn was not ended, and 'interrupted' was glued to its end
    ('[###   ] step 2/4 ... ETA    0sinterrupted')."""
    monkeypatch.setenv("MUTRANSFER_DATA_DIR", str(tmp_path))  # no token cache yet
    if at == "[":  # the trial's own progress line: the token cache there before
        assert main(["prepare", str(ROOT / "sweeps" / "quickstart.yaml")]) == 0
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    terminal = CtrlCTerminal(at)
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        assert main(["train", CONFIG, *TINY]) == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert terminal.pressed
    assert terminal.screen()[-2:] == ["interrupted", ""], terminal.getvalue()[-200:]
    if at == "[":  # where the trial stopped stays on the screen, above
        assert terminal.screen()[-3].startswith("["), terminal.getvalue()[-200:]


@pytest.mark.parametrize("how", ["same name", "through a link"])
def test_an_out_that_is_the_config_itself_is_refused(tmp_path, capsys, how):
    """Before: the trial ran and its JSON result replaced the config it was trained from."""
    config = tmp_path / "trial.yaml"
    config.write_text((ROOT / "configs" / "train.yaml").read_text())
    before = config.read_text()
    out = config
    if how == "through a link":
        out = tmp_path / "result.json"
        out.symlink_to(config)
    assert main(["train", str(config), *TINY, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}: is the input file {config}" in err, err
    assert config.read_text() == before


def test_an_out_ending_in_a_slash_is_refused_not_written_as_a_file_of_that_name(tmp_path,
                                                                                capsys):
    """Before: `--out results/` trained, then wrote the JSON to a file named `results`."""
    out = tmp_path / "results"
    assert main(["train", CONFIG, *TINY, "--out", f"{out}/"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {out}/: ends in /, a folder's name" in err, err
    assert not out.exists()


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_a_new_result_file_gets_the_permissions_of_a_file_open_makes(tmp_path, umask_022):
    """Before: 0600, the mode of the temp file it is written to then renamed from (the
    result unreadable to the group, unlike every other file of a run)."""
    path = tmp_path / "result.json"
    write_result(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and path.read_text() == "{}"


def test_a_replaced_result_file_keeps_its_permissions(tmp_path, umask_022):
    path = tmp_path / "result.json"
    path.write_text("old")
    path.chmod(0o664)
    write_result(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o664 and path.read_text() == "{}"
