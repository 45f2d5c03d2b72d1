"""Node: validate a request to forget turns (destructive: it must be confirmed).

The literal text to forget never reaches a stage trace (a trace records a string's
length only: graphs.summary), and no message quotes it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.evaluate_contracts.inputs import check_session_id, check_text, check_time
from nodes.evaluate_contracts.requests import ForgetRequest, parsed
from store.errors import InvalidInput

__all__ = ["DEFAULT_REASON", "MIN_TEXT_CHARS", "checked_forget"]

MIN_TEXT_CHARS = 4  # a shorter literal would match far more than a leaked secret
MAX_TEXT_CHARS = 10_000
MAX_REASON_CHARS = 500
DEFAULT_REASON = "forgotten on request"


class CheckedForgetWrites(TypedDict):
    forget: Any


@node
def checked_forget(request: Any) -> CheckedForgetWrites:
    req = request or {}
    if req.get("confirm") is not True:
        raise InvalidInput("forgetting deletes turns for good and cannot be undone; call "
                           "again with confirm=true")
    given = parsed(ForgetRequest, req)
    ids = sorted(set(given.exchange_ids or ()))
    session = given.session_id
    if session is not None:
        session = check_session_id(session)
    since = check_time("since", given.since)
    until = check_time("until", given.until)
    if since is not None and until is not None and until <= since:
        raise InvalidInput("until must be later than since")
    text = given.text
    if text is not None:
        text = check_text("text", text, max_chars=MAX_TEXT_CHARS)
        if len(text) < MIN_TEXT_CHARS:
            raise InvalidInput(f"text must be at least {MIN_TEXT_CHARS} characters (a literal "
                               "such as a leaked secret; it matches case-sensitively)")
    if not ids and session is None and since is None and until is None and text is None:
        raise InvalidInput("say what to forget: exchange_ids, session_id, since/until, "
                           "text, or several of them (all must match)")
    reason = given.reason
    reason = DEFAULT_REASON if reason is None else check_text(
        "reason", reason, max_chars=MAX_REASON_CHARS)
    return {"forget": {"ids": ids, "session": session, "since": since, "until": until,
                       "text": text, "reason": reason, "vacuum": given.vacuum}}
