"""The sweep's progress line (counts, ETA, terminal vs log output)."""

from __future__ import annotations

import io

from mutransfer.cli import main
from mutransfer.sweep.run.progress import Progress, fmt_duration


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_counts_and_eta_follow_the_trials():
    clock, out = Clock(), io.StringIO()
    p = Progress(6, out=out, tty=False, every_s=0, clock=clock)
    assert p.eta_s() is None  # nothing finished: no estimate yet
    p.started("a")
    p.started("b")
    clock.t = 10
    p.finished("a", "complete")
    p.started("c")
    clock.t = 20
    p.finished("b", "diverged")
    p.finished("c", "failed")
    assert (p.complete, p.diverged, p.failed, p.running) == (1, 1, 1, 0)
    # two finished trials took 10 and 20 s, two ran at once: 3 left -> 3 * 15 / 2
    assert p.eta_s() == 22.5
    line = p.line()
    assert line.startswith("[3/6] done 1  running 0  diverged 1  failed 1")
    assert "elapsed 20s" in line and "eta 22s" in line


def test_a_trial_stopped_early_is_finished_and_counted_apart_from_the_complete_ones():
    p = Progress(3, out=io.StringIO(), tty=False, every_s=0, clock=Clock())
    for key, status in (("a", "complete"), ("b", "stopped")):
        p.started(key)
        p.finished(key, status)
    assert (p.complete, p.stopped, p.finished_count) == (1, 1, 2)
    assert p.line().startswith("[2/3] done 1  running 0  diverged 0  stopped 1  failed 0")


def test_a_retried_trial_is_not_counted_twice():
    p = Progress(1, out=io.StringIO(), tty=False)
    p.started("a")
    p.retrying("a")
    p.started("a")
    p.finished("a", "complete")
    assert (p.running, p.complete, p.finished_count) == (0, 1, 1)


def test_log_output_is_one_line_per_change_and_a_terminal_redraws_one_line():
    clock, log = Clock(), io.StringIO()
    p = Progress(2, out=log, tty=False, every_s=5, clock=clock)
    p.started("a")  # at t=0: printed (first line)
    clock.t = 1
    p.started("b")  # changed, but within 5 s of the last line: not printed
    p.refresh()
    clock.t = 6
    p.refresh()  # due and changed: printed
    clock.t = 7
    p.refresh()  # nothing changed: not printed
    p.message("trial x failed")
    p.close()
    lines = log.getvalue().splitlines()
    assert [ln.split("|")[0].strip() for ln in lines] == [
        "[0/2] done 0  running 1  diverged 0  failed 0",
        "[0/2] done 0  running 2  diverged 0  failed 0",
        "trial x failed",
        "[0/2] done 0  running 2  diverged 0  failed 0"]
    term = io.StringIO()
    p = Progress(2, out=term, tty=True, clock=clock)
    p.started("a")
    p.message("trial y failed")
    p.close()
    text = term.getvalue()
    assert "\r\033[K[0/2]" in text and "trial y failed\n" in text and text.endswith("\n")


def test_durations_read_like_a_clock():
    assert [fmt_duration(s) for s in (0, 59, 61, 3599, 3600 + 120)] == \
        ["0s", "59s", "1m01s", "59m59s", "1h02m"]


def test_unwritable_storage_stops_the_sweep_in_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nmodel: {{base_width: 16}}\naxes: {{width: [16]}}\n"
                     f"storage: {blocker / 'results'}\n")
    assert main(["sweep", str(sweep)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not writable" in err


def test_the_status_line_redraws_in_place_on_a_terminal_and_prints_lines_elsewhere():
    from mutransfer.statusline import CLEAR, StatusLine

    term, log = io.StringIO(), io.StringIO()
    for out, tty in ((term, True), (log, False)):
        status = StatusLine(out, tty=tty)
        status.draw("[1/2] a")
        status.message("note")
        status.draw("[2/2] b")
        status.close()
    assert term.getvalue() == f"{CLEAR}[1/2] a{CLEAR}note\n{CLEAR}[2/2] b\n"
    assert log.getvalue() == "[1/2] a\nnote\n[2/2] b\n"
