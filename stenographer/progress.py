"""A tiny progress indicator on stderr for the command line (no dependency).

It draws only when stderr is a terminal and only once the work has taken longer than
``delay`` seconds, so quick commands and anything piped or captured print nothing.
A bar when the amount of work is known (``total``), a spinner when it is not.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sized
from types import TracebackType
from typing import TextIO, TypeVar

__all__ = ["DEFAULT_DELAY", "Progress", "track"]

DEFAULT_DELAY = 1.0  # seconds of work before anything is drawn
_INTERVAL = 0.1
_BAR = 24
_SPIN = "|/-\\"
_CLEAR = "\r\x1b[K"

T = TypeVar("T")


class Progress:
    """``with Progress("checking", total=6) as p: ... p.advance()``."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 delay: float = DEFAULT_DELAY, unit: str | None = None) -> None:
        self.label = label
        self.unit = unit  # with a unit, the bar shows the rate and the time left
        self.total = total
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.delay = delay
        self.enabled = _is_tty(self.stream)
        self.drawn = False
        self._started = 0.0
        self._tick = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="steno-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self.drawn:
                self.stream.write(_CLEAR)
                self.stream.flush()
                self.drawn = False

    def advance(self, n: int = 1, label: str | None = None) -> None:
        with self._lock:
            self.done += n
            if label is not None:
                self.label = label

    def line(self) -> str:
        """The line as it would be drawn now."""
        elapsed = time.monotonic() - self._started
        if self.total:
            filled = min(_BAR, _BAR * self.done // self.total)
            bar = "█" * filled + "░" * (_BAR - filled)
            line = f"{self.label} {bar} {self.done}/{self.total} {elapsed:.1f}s"
            if self.unit and elapsed > 0 and self.done:
                rate = self.done / elapsed
                left = max(0, self.total - self.done) / rate
                line += f" {rate:,.0f} {self.unit}/s ETA {left:.0f}s"
            return line
        return f"{self.label} {_SPIN[self._tick % len(_SPIN)]} {elapsed:.1f}s"

    def _loop(self) -> None:
        while not self._stop.wait(_INTERVAL):
            if time.monotonic() - self._started < self.delay:
                continue
            with self._lock:
                self._tick += 1
                self.stream.write(_CLEAR + self.line())
                self.stream.flush()
                self.drawn = True


def track(items: Iterable[T], label: str, total: int | None = None, *,
          stream: TextIO | None = None, delay: float = DEFAULT_DELAY) -> Iterator[T]:
    """Iterate over ``items`` with a progress bar (``total`` defaults to ``len(items)``)."""
    if total is None and isinstance(items, Sized):
        total = len(items)
    with Progress(label, total, stream=stream, delay=delay) as progress:
        for item in items:
            yield item
            progress.advance()


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False
