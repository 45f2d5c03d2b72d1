"""Nodes: validate read requests (search, guard, notes, milestone) and resolve sessions."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import (
    check_session_id,
    check_text,
    check_time,
    check_trace_id,
)
from nodes.evaluate_contracts.requests import (
    MAX_QUERY_CHARS,
    GuardRequest,
    MilestoneRequest,
    NotesRequest,
    SearchRequest,
    parsed,
)
from store.errors import InvalidInput, NotFound
from store.exchanges import session_row_id
from store.milestones import exchange_session

__all__ = [
    "MAX_QUERY_CHARS",
    "checked_guard",
    "checked_milestone",
    "checked_notes",
    "checked_query",
    "decode_cursor",
    "encode_cursor",
]


_FINGERPRINTED = ("query", "session_id", "cross_session", "mode", "role", "since", "until",
                  "trace_id", "flag")
_FINGERPRINT_JSON = json.JSONEncoder(default=str)  # json.dumps(..., default=str), made once


def _fingerprint(req: Mapping[str, Any]) -> str:
    raw = _FINGERPRINT_JSON.encode([req.get(k) for k in _FINGERPRINTED])
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def encode_cursor(req: Mapping[str, Any], score: float, exchange_id: int) -> str:
    raw = json.dumps({"f": _fingerprint(req), "s": score, "i": exchange_id})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(req: Mapping[str, Any], cursor: str) -> tuple[float, int]:
    """(score, exchange id) of the last hit of the previous page."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
        score, exchange_id = float(data["s"]), int(data["i"])
        fingerprint = data["f"]
    except (ValueError, KeyError, TypeError):
        raise InvalidInput("cursor is not valid; pass the next_cursor of the previous page "
                           "unchanged, or omit it for the first page") from None
    if fingerprint != _fingerprint(req):
        raise InvalidInput("cursor belongs to a different query; repeat the same query, "
                           "filters and mode with it, or omit it for the first page")
    return score, exchange_id


def _session_row(run: RunContext, session: str, *, required: bool) -> int | None:
    with run.store.read() as conn:
        row = session_row_id(conn, session)
    if row is None and required:
        raise NotFound(f"no session {session!r} has been recorded; session ids are "
                       "case-sensitive (list them with `stenographer sessions`)")
    return row


class CheckedQueryWrites(TypedDict):
    query: Any


@node
def checked_query(request: Any, *, run: RunContext) -> CheckedQueryWrites:
    req = request or {}
    given = parsed(SearchRequest, req)
    query = check_text("query", given.query, max_chars=MAX_QUERY_CHARS)
    role = None if given.role == "any" else given.role
    cross = given.cross_session
    session = given.session_id
    if session in (None, "") and not cross:
        raise InvalidInput("session_id is required unless cross_session=true "
                           "(reads are scoped to one session by default)")
    session_row = None
    if not cross:
        session_row = _session_row(run, check_session_id(session), required=False)
    since, until = check_time("since", given.since), check_time("until", given.until)
    if since is not None and until is not None and since >= until:
        raise InvalidInput("since must be earlier than until")
    trace_id = check_trace_id(given.trace_id or None)
    flag = given.flag
    after = None
    if req.get("cursor"):
        after = list(decode_cursor(req, str(req["cursor"])))
    return {
        "query": {
            "text": query,
            "mode": given.mode,
            "role": role,
            "limit": given.limit,
            "session_row": session_row,
            "unknown_session": not cross and session_row is None,
            "since": since,
            "until": until,
            "after": after,
            "trace_id": trace_id,
            "flag": flag,
        }
    }


class CheckedGuardWrites(TypedDict):
    query: Any
    session: Any
    max_chars: Any


@node
def checked_guard(request: Any, *, run: RunContext) -> CheckedGuardWrites:
    given = parsed(GuardRequest, request or {})
    session = check_session_id(given.session_id)
    text = given.query
    if text is not None and text.strip() == "":
        text = None
    if text is not None:
        text = check_text("query", text, max_chars=MAX_QUERY_CHARS)
    settings = run.settings
    top_k = given.top_k or settings.top_k
    max_chars = given.max_chars or settings.max_chars
    session_row = _session_row(run, session, required=False)
    return {
        "query": {
            "text": text,
            "mode": "hybrid",
            "role": None,
            "limit": top_k,
            "session_row": session_row,
            "unknown_session": session_row is None,
            "since": None,
            "until": None,
            "after": None,
        },
        "session": session,
        "max_chars": max_chars,
    }


class CheckedNotesWrites(TypedDict):
    session: Any
    max_chars: Any
    session_row: Any


@node
def checked_notes(request: Any, *, run: RunContext) -> CheckedNotesWrites:
    given = parsed(NotesRequest, request or {})
    session = check_session_id(given.session_id)
    max_chars = given.max_chars or run.settings.max_chars
    return {"session": session, "max_chars": max_chars,
            "session_row": _session_row(run, session, required=False)}


class CheckedMilestoneWrites(TypedDict):
    milestone: Any


@node
def checked_milestone(request: Any, *, run: RunContext) -> CheckedMilestoneWrites:
    given = parsed(MilestoneRequest, request or {})
    session = check_session_id(given.session_id)
    exchange_id = given.exchange_id
    label = " ".join(check_text("label", given.label, max_chars=200).split())
    session_row = _session_row(run, session, required=True)
    with run.store.read() as conn:
        owner = exchange_session(conn, exchange_id)
    if owner is None:
        raise NotFound(f"exchange #{exchange_id} does not exist", exchange_id=exchange_id)
    if owner != session_row:
        raise InvalidInput(
            f"exchange #{exchange_id} belongs to another session, not {session!r}; "
            "mark a turn of this session (ids are in ingest replies and search hits)",
            exchange_id=exchange_id,
        )
    return {"milestone": {"session": session, "session_row": session_row,
                          "exchange_id": exchange_id, "label": label}}
