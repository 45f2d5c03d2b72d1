"""Automatic capture: find the hosts' transcript files and run the capture graphs on them.

A pass over a list of files is one run of the ``capture`` graph (graphs/capture): each
file read a batch of records at a time after its cursor, each batch stored through the
ingest's node functions in one transaction, the cursor moved past it, until the file is
read to its end. A watcher repeats passes over the
files whose size, time or inode changed since it last looked (polling: no dependency,
works on every platform and network file system). Only one capture process works on a
store at a time (``store.capture_lock``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodes.extract.transcripts import CLAUDE_CODE, CODEX
from nodes.publish.wording import counted
from store.errors import InvalidInput

if TYPE_CHECKING:
    from stenographer.app import App
    from stenographer.settings import Settings

__all__ = ["Capturer", "FileReport", "PassReport", "discover", "hook_event", "hook_payload",
           "hook_session", "hook_targets", "pass_request"]

# Records per batch of a capture pass, one transaction each; a batch also ends at 1 MiB of
# transcript (nodes.load_evidence.transcripts). Batches of 200 cost ~14% more CPU a turn.
DEFAULT_BATCH = 1_000
ERROR_RETRY_S = 10.0  # a watcher retries a file that failed after this long
MAX_SKIPS_LISTED = 20  # skipped lines listed per file in a pass report
Source = tuple[str, Path]  # (kind, transcript path)


def _claude_files(root: Path) -> list[Path]:
    # <root>/<project>/<session>.jsonl; sub-agent transcripts (agent-*.jsonl, or in a
    # session's own sub-directory) belong to their parent session and are not followed.
    return sorted(p for p in root.glob("*/*.jsonl")
                  if not p.name.startswith("agent-") and p.is_file())


def _codex_files(root: Path, session: str | None = None) -> list[Path]:
    pattern = f"rollout-*{session}.jsonl" if session else "rollout-*.jsonl"
    return sorted(p for p in root.rglob(pattern) if p.is_file())


def discover(kinds: Iterable[str], claude_dir: Path, codex_dir: Path) -> list[Source]:
    """The transcript files of the given hosts under their roots (missing roots: none)."""
    found: list[Source] = []
    for kind in kinds:
        if kind == CLAUDE_CODE and claude_dir.is_dir():
            found += [(kind, p.absolute()) for p in _claude_files(claude_dir)]
        elif kind == CODEX and codex_dir.is_dir():
            found += [(kind, p.absolute()) for p in _codex_files(codex_dir)]
    return found


@dataclass
class FileReport:
    kind: str
    path: str
    captured: int = 0
    duplicates: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    reset: str | None = None
    error: str | None = None
    position: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "skipped": self.skipped[:MAX_SKIPS_LISTED],
                "skipped_count": len(self.skipped)}

    def line(self) -> str:
        parts = [f"+{counted(self.captured, 'turn')}"]
        if self.duplicates:
            parts.append(f"{self.duplicates} already captured")
        if self.reset:
            parts.append(f"read again from the start ({self.reset})")
        for skip in self.skipped[:MAX_SKIPS_LISTED]:
            parts.append(f"skipped line {skip['line']}: {skip['reason']}")
        if len(self.skipped) > MAX_SKIPS_LISTED:
            more = len(self.skipped) - MAX_SKIPS_LISTED
            parts.append(f"… {counted(more, 'more skipped line')}")
        if self.error:
            parts.append(f"error: {self.error}")
        return f"  {self.kind} {self.path}: " + "; ".join(parts)


@dataclass
class PassReport:
    files: list[FileReport] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    duration_ms: float = 0.0

    @classmethod
    def of(cls, reply: dict[str, Any], started: float) -> PassReport:
        """The report of a capture pass from its reply; ``started``: its
        ``time.perf_counter()`` at the start."""
        return cls(files=[FileReport(**f) for f in reply["files"]],
                   duration_ms=(time.perf_counter() - started) * 1e3)

    @property
    def captured(self) -> int:
        return sum(f.captured for f in self.files)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.files if f.error)

    def as_dict(self) -> dict[str, Any]:
        return {"files": len(self.files), "captured": self.captured,
                "duplicates": sum(f.duplicates for f in self.files),
                "skipped": sum(len(f.skipped) for f in self.files), "errors": self.errors,
                "duration_ms": round(self.duration_ms, 1),
                "details": [f.as_dict() for f in self.files if _eventful(f)]}

    def text(self) -> str:
        d = self.as_dict()
        head = (f"capture: {counted(d['files'], 'file')}, {counted(d['captured'], 'turn')} "
                f"captured, {d['duplicates']} already captured, "
                f"{counted(d['skipped'], 'line')} skipped, {counted(d['errors'], 'error')} "
                f"({d['duration_ms']:.0f} ms)")
        return "\n".join([head, *(f.line() for f in self.files if _eventful(f))])


def _eventful(f: FileReport) -> bool:
    return bool(f.captured or f.skipped or f.error or f.reset)


def pass_request(sources: Iterable[Source], batch: int = DEFAULT_BATCH) -> dict[str, Any]:
    """The request of a capture pass over ``sources``, ``batch`` records a transaction."""
    return {"sources": [{"kind": kind, "path": str(path)} for kind, path in sources],
            "max_records": batch}


class Capturer:
    """Runs capture passes for one application (one store)."""

    def __init__(self, app: App, batch: int = DEFAULT_BATCH,
                 stop: threading.Event | None = None) -> None:
        self.app = app
        self.batch = batch
        self.stop = stop or threading.Event()  # set: finish the batch at hand, then return

    def run_pass(self, sources: Iterable[Source]) -> PassReport:
        """One run of the ``capture`` graph over ``sources`` (graphs/capture)."""
        started = time.perf_counter()
        ctx = dataclasses.replace(self.app.ctx, stop=self.stop)
        out, _ = self.app.graphs.run("capture", {"request": pass_request(sources, self.batch)},
                                     ctx)
        return PassReport.of(out["reply"], started)

    def watch(self, find: Callable[[], list[Source]], interval: float,
              on_pass: Callable[[PassReport], None]) -> None:
        """Until ``self.stop`` is set: every ``interval`` seconds, a pass over the files
        that changed since the last look (all of them on the first): a scheduler job
        (stenographer.scheduler) run on this thread."""
        from stenographer.scheduler import Job, Scheduler

        seen: dict[str, tuple[int, int, int]] = {}
        retry_at: dict[str, float] = {}

        def tick() -> bool:
            changed: list[tuple[Source, tuple[int, int, int]]] = []
            now = time.monotonic()
            for kind, path in find():
                try:
                    st = path.stat()
                except OSError:
                    continue
                sig = (st.st_ino, st.st_size, st.st_mtime_ns)
                key = str(path)
                if seen.get(key) != sig and retry_at.get(key, 0.0) <= now:
                    changed.append(((kind, path), sig))
            if changed:
                report = self.run_pass([source for source, _ in changed])
                signatures = dict((str(path), sig) for (_, path), sig in changed)
                for file_report in report.files:
                    if file_report.error:
                        retry_at[file_report.path] = time.monotonic() + ERROR_RETRY_S
                    else:  # as it was before reading: growth during the read is seen
                        seen[file_report.path] = signatures[file_report.path]  # next time
                        retry_at.pop(file_report.path, None)
                on_pass(report)
            return True  # a file that failed is retried on its own (retry_at)

        job = Job(name="capture", thread="steno-capture", tick=tick, interval=interval)
        Scheduler(job, stopping=self.stop).run()


# --- host hooks -------------------------------------------------------------------------------

HOOK_HOSTS = (CLAUDE_CODE, CODEX)
_SESSION_ID = re.compile(r"[0-9A-Za-z-]{1,100}")  # safe inside a file name pattern
MAX_HOOK_PAYLOAD = 1_000_000


def hook_payload(arg: str | None) -> dict[str, Any]:
    """The JSON a host hands its hook: Codex's `notify` passes it as the last argument,
    Claude Code's hooks on stdin. Anything else is an empty payload."""
    text = arg
    if text is None and not sys.stdin.isatty():
        text = sys.stdin.read(MAX_HOOK_PAYLOAD)
    if not text or not text.strip():
        return {}
    try:
        payload = json.loads(text)
    except ValueError:
        raise InvalidInput("the hook payload is not JSON (Claude Code passes it on stdin, "
                           "Codex as the last argument)") from None
    return payload if isinstance(payload, dict) else {}


def hook_event(payload: dict[str, Any]) -> str:
    """What a hook call is for: the host's ``hook_event_name`` (``SessionStart``,
    ``PreCompact``, ``Stop``...), ``notify`` for Codex's notify program, or
    ``capture`` when the payload says neither."""
    event = payload.get("hook_event_name")
    if isinstance(event, str) and event.strip():
        return event.strip()[:60]
    return "notify" if payload.get("type") == "agent-turn-complete" else "capture"


def hook_session(payload: dict[str, Any]) -> str | None:
    """The host's id of the session a hook call is about (Claude Code and Codex hooks:
    ``session_id``; Codex notify: ``thread-id``), when it is a plain id."""
    for key in ("session_id", "thread-id", "thread_id"):
        value = payload.get(key)
        if isinstance(value, str) and _SESSION_ID.fullmatch(value):
            return value
    return None


def hook_targets(host: str, payload: dict[str, Any], settings: Settings) -> list[Source]:
    """The transcript(s) a hook call is about: the file the host names
    (``transcript_path``), else the file of the session it names (Claude Code:
    ``<project>/<session>.jsonl``; Codex: the rollout file with the id in its name).
    Without either, every transcript of that host."""
    named = payload.get("transcript_path")
    if isinstance(named, str) and named.strip():
        return [(host, Path(named).expanduser().absolute())]
    session = hook_session(payload)
    if session is not None:
        if host == CLAUDE_CODE and settings.capture_claude_dir.is_dir():
            files = sorted(settings.capture_claude_dir.glob(f"*/{session}.jsonl"))
        elif host == CODEX and settings.capture_codex_dir.is_dir():
            files = _codex_files(settings.capture_codex_dir, session)
        else:
            files = []
        if files:
            return [(host, p.absolute()) for p in files]
    return discover([host], settings.capture_claude_dir, settings.capture_codex_dir)
