"""Transcript records → turns: the JSONL formats that Claude Code and Codex CLI write.

Claude Code: ``~/.claude/projects/<project>/<session-uuid>.jsonl``, one record per line;
``type`` "user" / "assistant" records hold ``message.content`` (a string, or a list of
blocks of which the ``text`` blocks are the words; ``tool_use``, ``tool_result``,
``thinking`` and images are not), with ``uuid``, ``sessionId`` and ``timestamp``.
Other types (summary, system, file-history-snapshot, queue-operation, ...) are not
turns, nor are meta records (``isMeta``), compaction summaries or sub-agent side chains.

Codex CLI: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``; records
``{timestamp, type, payload}``: ``session_meta`` (payload.id is the session),
``response_item`` whose payload is ``{type: "message", role, content: [{type:
"input_text" | "output_text", text}]}``; other payloads (reasoning, function calls),
``event_msg``, ``turn_context`` and ``compacted`` are not turns, nor are the context
blocks Codex sends as user messages (environment context, AGENTS.md instructions).
Older Codex files have the message objects at top level, and a first line holding the
session ``id``.

Records also name the directory the host worked in (Claude Code: ``cwd`` on every
record; Codex: ``session_meta`` and ``turn_context``), which capture records as the
session's directory: a new session in that directory is briefed from it.

Every turn gets a source key that does not depend on the file's path or position, so a
record read twice (after a restart, a truncation, a rotation, or a host copying a
session's history into a new file) is stored once: Claude Code's record uuid; for Codex,
which gives messages no id, a hash of the record's exact bytes (they include its time
to the millisecond). Older Codex records carry no time; their key adds the session and
the record's byte offset, since the same words may well be said twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from constants import CAPTURE_KINDS as KINDS
from constants import CLAUDE_CODE, CODEX

__all__ = ["CLAUDE_CODE", "CODEX", "KINDS", "Parsed", "parse_record", "session_from_name"]

CLAUDE_SKIP_FLAGS = ("isMeta", "isSidechain", "isCompactSummary", "isVisibleInTranscriptOnly")
CODEX_TEXT_BLOCKS = ("input_text", "output_text", "text")
CODEX_CONTEXT_PREFIXES = ("<environment_context>", "<user_instructions>",
                          "# AGENTS.md instructions", "<permissions instructions>")
ROLES = ("user", "assistant")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


class CorruptRecord(ValueError):
    """A line that is not a record of the format it should be (reported, then skipped)."""


@dataclass(frozen=True)
class Parsed:
    """One line's outcome: a turn (an ingest request), a session id learnt, or neither;
    and the directory the host worked in, when the record names it."""

    turn: dict[str, Any] | None = None
    session: str | None = None  # a Codex session_meta line names the file's session
    cwd: str | None = None  # Claude Code records, Codex session_meta and turn_context


MAX_CWD_CHARS = 4_096


def _cwd(value: Any) -> str | None:
    """A record's working directory: an absolute path (POSIX or Windows), else nothing."""
    return _absolute(value) if isinstance(value, str) else None


@lru_cache(maxsize=256)
def _absolute(value: str) -> str | None:
    """``value`` if it is an absolute path (cached: a host names the same directory in
    record after record, and parsing a path costs more than the rest of the record)."""
    if not 0 < len(value) <= MAX_CWD_CHARS:
        return None
    if PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute():
        return value
    return None


def session_from_name(kind: str, file_name: str) -> str | None:
    """The host's session id in a transcript's file name (the last uuid in it)."""
    found = _UUID.findall(file_name)
    return found[-1].lower() if found else None


def _text_blocks(content: Any, block_types: tuple[str, ...], where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise CorruptRecord(f"{where} is {type(content).__name__}, not text or a list of "
                            "blocks")
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in block_types:
            text = block.get("text")
            if not isinstance(text, str):
                raise CorruptRecord(f"a {block.get('type')} block of {where} has no text")
            parts.append(text)
    return "\n\n".join(p for p in parts if p.strip())


def _claude(rec: dict[str, Any], raw: bytes) -> Parsed:
    kind = rec.get("type")
    cwd = _cwd(rec.get("cwd"))
    if kind not in ROLES or any(rec.get(flag) for flag in CLAUDE_SKIP_FLAGS):
        return Parsed(cwd=cwd)
    message = rec.get("message")
    if not isinstance(message, dict):
        raise CorruptRecord(f"a {kind} record without a message object")
    session = rec.get("sessionId")
    if not isinstance(session, str) or not session.strip():
        raise CorruptRecord(f"a {kind} record without a sessionId")
    text = _text_blocks(message.get("content"), ("text",), "message.content")
    if not text.strip():
        return Parsed(cwd=cwd)  # tool calls and results, thinking: not conversation
    uuid = rec.get("uuid")
    key = uuid if isinstance(uuid, str) and uuid else hashlib.sha256(raw).hexdigest()[:32]
    return Parsed(turn={
        "role": kind, "content": text, "session_id": f"{CLAUDE_CODE}:{session}",
        "created_at": rec.get("timestamp"), "source_key": f"{CLAUDE_CODE}:{key}"}, cwd=cwd)


def _codex(rec: dict[str, Any], raw: bytes, session: str | None, offset: int) -> Parsed:
    kind = rec.get("type")
    if kind == "session_meta" or ("id" in rec and "timestamp" in rec and "type" not in rec):
        meta = rec.get("payload") if kind == "session_meta" else rec
        sid = meta.get("id") if isinstance(meta, dict) else None
        if not isinstance(sid, str) or not sid.strip():
            raise CorruptRecord("a session_meta record without a session id")
        return Parsed(session=sid, cwd=_cwd(meta.get("cwd")) if isinstance(meta, dict)
                      else None)
    if kind == "turn_context":
        context = rec.get("payload")
        return Parsed(cwd=_cwd(context.get("cwd")) if isinstance(context, dict) else None)
    if kind == "response_item":
        item = rec.get("payload")
        if not isinstance(item, dict):
            raise CorruptRecord("a response_item record without a payload object")
    elif kind == "message":  # older files: the item itself at top level
        item = rec
    else:
        return Parsed()
    role = item.get("role")
    if item.get("type") != "message" or role not in ROLES:
        return Parsed()
    text = _text_blocks(item.get("content"), CODEX_TEXT_BLOCKS, "payload.content")
    if not text.strip() or (role == "user"
                            and text.lstrip().startswith(CODEX_CONTEXT_PREFIXES)):
        return Parsed()
    if session is None:
        raise CorruptRecord("a message before the session_meta record, in a file whose "
                            "name holds no session id")
    keyed = raw if rec.get("timestamp") else f"{session}\n{offset}\n".encode() + raw
    digest = hashlib.sha256(keyed).hexdigest()[:32]
    return Parsed(turn={
        "role": role, "content": text, "session_id": f"{CODEX}:{session}",
        "created_at": rec.get("timestamp"), "source_key": f"{CODEX}:{digest}"})


def parse_record(kind: str, raw: bytes, session: str | None = None, offset: int = 0
                 ) -> Parsed:
    """Parse one line (without its newline) found at byte ``offset``.

    Raises CorruptRecord for a line that is not valid UTF-8 JSON or not a record of the
    format; returns an empty Parsed for a record that is not a conversation turn.
    """
    try:
        rec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as ex:
        raise CorruptRecord(f"not UTF-8 text (byte {ex.start})") from None
    except ValueError as ex:
        raise CorruptRecord(f"not JSON ({str(ex)[:80]})") from None
    if not isinstance(rec, dict):
        raise CorruptRecord(f"a JSON {type(rec).__name__}, not a record object")
    if kind == CLAUDE_CODE:
        return _claude(rec, raw)
    return _codex(rec, raw, session, offset)
