"""Nodes: validate what the capture graphs are asked to read and to record."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from nodes.context import node
from nodes.evaluate_contracts.inputs import check_int, check_text
from nodes.extract.transcripts import KINDS
from store.errors import InvalidInput

__all__ = ["BRIEFING_EVENT", "MAX_BATCH_RECORDS", "checked_cursor_step", "checked_sources",
           "checked_transcript", "hook_task"]

BRIEFING_EVENT = "SessionStart"  # a host's hook event answered with the briefing
MAX_EVENT_CHARS = 60
MAX_BATCH_RECORDS = 10_000
MAX_PATH_CHARS = 4_096
_COUNTS = ("captured", "duplicates", "skipped", "resets")


def _kind(value: Any) -> str:
    if value not in KINDS:
        raise InvalidInput(f"kind={value!r} is not valid; valid kinds: {', '.join(KINDS)}")
    return str(value)


def _path(value: Any, name: str = "path") -> str:
    text = check_text(name, value, max_chars=MAX_PATH_CHARS)
    if not Path(text).is_absolute():
        raise InvalidInput(f"{name}={text[:80]!r} must be absolute, e.g. "
                           "/home/me/.claude/projects/p/<session>.jsonl")
    return text


class CheckedTranscriptWrites(TypedDict):
    source: Any


@node
def checked_transcript(request: Any) -> CheckedTranscriptWrites:
    """The transcript file to read: its format (kind), absolute path and batch size."""
    raw = request or {}
    return {"source": {
        "kind": _kind(raw.get("kind")),
        "path": _path(raw.get("path")),
        "max_records": check_int("max_records", raw.get("max_records", 200), 1,
                                 MAX_BATCH_RECORDS),
    }}


class CheckedSourcesWrites(TypedDict):
    files: Any


@node
def checked_sources(request: Any) -> CheckedSourcesWrites:
    """The transcript files of a capture pass, in order, each as ``checked_transcript``
    describes one."""
    raw = request or {}
    sources = raw.get("sources")
    if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
        raise InvalidInput("sources must be a list of {kind, path} objects")
    max_records = check_int("max_records", raw.get("max_records", 200), 1, MAX_BATCH_RECORDS)
    return {"files": [{"kind": _kind(s.get("kind")), "path": _path(s.get("path")),
                       "max_records": max_records} for s in sources]}


class CheckedCursorStepWrites(TypedDict):
    step: Any


@node
def checked_cursor_step(request: Any) -> CheckedCursorStepWrites:
    """Where a transcript now stands and what the pass did, checked before it is stored."""
    raw = request or {}
    step: dict[str, Any] = {"kind": _kind(raw.get("kind")), "name": _path(raw.get("path"))}
    step["position"] = check_int("position", raw.get("position"), 0, 2**63 - 1)
    step["lines"] = check_int("lines", raw.get("lines"), 0, 2**63 - 1)
    for name in _COUNTS:
        step[name] = check_int(name, raw.get(name, 0), 0, 2**31 - 1)
    for name in ("identity", "head", "session", "error"):
        value = raw.get(name)
        step[name] = None if value is None else check_text(name, value, max_chars=2_000)
    cwd = raw.get("cwd")
    step["cwd"] = None if cwd is None else _path(cwd, "cwd")
    ok = raw.get("ok", True)
    if not isinstance(ok, bool):
        raise InvalidInput("ok must be true or false")
    step["ok"] = ok
    return {"step": step}


class HookTaskWrites(TypedDict):
    task: str


@node
def hook_task(request: Any) -> HookTaskWrites:
    """What a host's hook call is for, from its event: ``SessionStart`` (a session starts
    or restarts) is answered with the briefing; every other event (``PreCompact``,
    ``Stop``, Codex's notify...) captures what is new in the transcripts it names."""
    event = check_text("event", (request or {}).get("event"), max_chars=MAX_EVENT_CHARS)
    return {"task": "briefing" if event == BRIEFING_EVENT else "capture"}
