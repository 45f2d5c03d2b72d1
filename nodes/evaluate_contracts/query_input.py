"""Nodes: validate read requests (search, guard, notes, milestone) and resolve sessions."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import (
    ROLES,
    check_int,
    check_session_id,
    check_text,
    check_time,
    check_trace_id,
)
from nodes.extract.nafe import SIGNATURES
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

MAX_QUERY_CHARS = 2_000
MODES = ("hybrid", "keyword", "semantic")
MAX_LABEL_CHARS = 200
FLAG_FILTERS = ("NAFE", *SIGNATURES)  # NAFE: any of the four signatures


def _fingerprint(req: Mapping[str, Any]) -> str:
    keys = ("query", "session_id", "cross_session", "mode", "role", "since", "until",
            "trace_id", "flag")
    raw = json.dumps([req.get(k) for k in keys], default=str)
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
    query = check_text("query", req.get("query"), max_chars=MAX_QUERY_CHARS)
    mode = req.get("mode") or "hybrid"
    if mode not in MODES:
        raise InvalidInput(f"mode={mode!r} is not valid; valid: {', '.join(MODES)}")
    role = req.get("role")
    if role in (None, "", "any"):
        role = None
    elif role not in ROLES:
        raise InvalidInput(f"role={role!r} is not valid; valid: any, {', '.join(ROLES)}")
    limit = check_int("limit", req.get("limit", 10), 1, 50)
    cross = bool(req.get("cross_session", False))
    session = req.get("session_id")
    if session in (None, "") and not cross:
        raise InvalidInput("session_id is required unless cross_session=true "
                           "(reads are scoped to one session by default)")
    session_row = None
    if not cross:
        session_row = _session_row(run, check_session_id(session), required=False)
    since, until = check_time("since", req.get("since")), check_time("until", req.get("until"))
    if since is not None and until is not None and since >= until:
        raise InvalidInput("since must be earlier than until")
    trace_id = check_trace_id(req.get("trace_id") or None)
    flag = req.get("flag") or None
    if flag is not None and flag not in FLAG_FILTERS:
        raise InvalidInput(f"flag={str(flag)[:40]!r} is not valid; valid: "
                           f"{', '.join(FLAG_FILTERS)} (NAFE: any of the four)")
    after = None
    if req.get("cursor"):
        after = list(decode_cursor(req, str(req["cursor"])))
    return {
        "query": {
            "text": query,
            "mode": mode,
            "role": role,
            "limit": limit,
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
    req = request or {}
    session = check_session_id(req.get("session_id"))
    text = req.get("query")
    if text is not None and text.strip() == "":
        text = None
    if text is not None:
        text = check_text("query", text, max_chars=MAX_QUERY_CHARS)
    top_k = check_int("top_k", req.get("top_k") or run.settings.top_k, 1, 50)
    max_chars = check_int("max_chars", req.get("max_chars") or run.settings.max_chars,
                          500, 200_000)
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
    req = request or {}
    session = check_session_id(req.get("session_id"))
    max_chars = check_int("max_chars", req.get("max_chars") or run.settings.max_chars,
                          500, 200_000)
    return {"session": session, "max_chars": max_chars,
            "session_row": _session_row(run, session, required=False)}


class CheckedMilestoneWrites(TypedDict):
    milestone: Any


@node
def checked_milestone(request: Any, *, run: RunContext) -> CheckedMilestoneWrites:
    req = request or {}
    session = check_session_id(req.get("session_id"))
    exchange_id = check_int("exchange_id", req.get("exchange_id"), 1, 2**63 - 1)
    label = " ".join(check_text("label", req.get("label"), max_chars=MAX_LABEL_CHARS).split())
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
