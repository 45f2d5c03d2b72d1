"""Terminal output: the progress helper draws only on a TTY, colour only when asked."""

from __future__ import annotations

import io
import time

from stenographer.progress import Progress, track
from stenographer.render import run_line, waterfall


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _wait_for(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "progress never drew"
        time.sleep(0.01)


def test_progress_draws_on_a_tty_and_clears_its_line() -> None:
    stream = FakeTTY()
    with Progress("checking", total=4, stream=stream, delay=0) as progress:
        progress.advance(2)
        _wait_for(lambda: "2/4" in stream.getvalue())
    out = stream.getvalue()
    assert "checking" in out and "█" in out
    assert out.endswith("\r\x1b[K")  # the line is cleared for what follows


def test_progress_spinner_without_total() -> None:
    stream = FakeTTY()
    with Progress("working", stream=stream, delay=0):
        _wait_for(lambda: "working" in stream.getvalue())
    assert stream.getvalue().endswith("\r\x1b[K")


def test_progress_is_silent_when_not_a_tty_or_quick() -> None:
    piped = io.StringIO()
    with Progress("checking", total=2, stream=piped, delay=0) as progress:
        progress.advance(2)
        time.sleep(0.3)
    assert piped.getvalue() == ""
    quick = FakeTTY()
    with Progress("checking", stream=quick, delay=60):
        time.sleep(0.3)
    assert quick.getvalue() == ""


def test_track_yields_everything() -> None:
    assert list(track([1, 2, 3], "items", stream=io.StringIO())) == [1, 2, 3]


TRACE = {
    "run_id": "ab" * 16, "graph": "ingest", "status": "Failed", "duration_ms": 2.0,
    "stages": [
        {"node": "validate", "step": 1, "duration_ms": 0.5, "writes": {"turn": "{...}"},
         "error": None},
        {"node": "store", "step": 2, "duration_ms": 1.5, "writes": {},
         "error": "StoreError: disk full"},
    ],
}


def test_waterfall_highlights_errors_only_in_colour() -> None:
    plain = waterfall(TRACE)
    assert "\x1b[" not in plain
    assert "ERROR StoreError: disk full" in plain and "turn = {...}" in plain
    coloured = waterfall(TRACE, color=True)
    error_line = next(line for line in coloured.splitlines() if "disk full" in line)
    assert error_line.startswith("\x1b[31m") and error_line.endswith("\x1b[0m")
    assert "\x1b[31mFailed\x1b[0m" in coloured.splitlines()[0]
    ok_line = next(line for line in coloured.splitlines() if "validate" in line)
    assert "\x1b[" not in ok_line


def test_run_line_marks_failed_runs() -> None:
    run = {"run_id": "cd" * 16, "graph": "search", "status": "Failed", "started_at": 0.0,
           "duration_ms": 1.25}
    assert "\x1b[31m" in run_line(run, color=True)
    assert "1970-01-01T00:00:00Z" in run_line(run) and "\x1b[" not in run_line(run)
