"""Shared checks of caller input: text, session ids, times. Messages say what is valid."""

from __future__ import annotations

import math
import os
import re
from datetime import UTC, datetime
from typing import Any

from store.errors import InvalidInput

__all__ = [
    "MAX_SESSION_ID_CHARS",
    "ROLES",
    "TRACE_ID_FORM",
    "check_int",
    "check_session_id",
    "check_text",
    "check_time",
    "check_trace_id",
    "iso",
    "lone_surrogate",
    "new_trace_id",
]

ROLES = ("user", "assistant", "system", "tool")
MAX_SESSION_ID_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
TRACE_ID_FORM = re.compile(r"VT-\d{8}-[0-9a-f]{8}")


def check_text(name: str, value: Any, *, max_chars: int, allow_empty: bool = False) -> str:
    """A string that is valid Unicode (no lone surrogates) and within bounds."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, got {type(value).__name__}")
    if not allow_empty and (not value or value.isspace()):  # what strips to nothing
        raise InvalidInput(f"{name} must not be empty or only white space")
    if len(value) > max_chars:
        raise InvalidInput(f"{name} is {len(value):,} characters; at most {max_chars:,} allowed")
    problem = lone_surrogate(value)
    if problem is not None:
        raise InvalidInput(f"{name} {problem}")
    return value


def lone_surrogate(value: str) -> str | None:
    """What is wrong with text holding a lone surrogate (not valid Unicode), else None."""
    if value.isascii():  # known without reading it, and no surrogate is ASCII
        return None
    bad = _SURROGATE.search(value)
    if bad is None:
        return None
    return (f"contains a lone surrogate (U+{ord(bad.group()):04X}) at position {bad.start()}; "
            "send valid UTF-8 text")


def check_session_id(value: Any) -> str:
    """1–200 printable characters, no control characters."""
    text = check_text("session_id", value, max_chars=MAX_SESSION_ID_CHARS)
    if _CONTROL.search(text):
        raise InvalidInput("session_id must not contain control characters (tabs, newlines)")
    return text


def check_time(name: str, value: Any) -> float | None:
    """ISO 8601 date or date-time (naive means UTC), or None; returns epoch seconds."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO 8601 string such as 2026-11-30T14:05:00Z")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{name}={value[:40]!r} is not an ISO 8601 date or date-time "
            "(e.g. 2026-11-30 or 2026-11-30T14:05:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = moment.timestamp()
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInput(f"{name} must be on or after 1970-01-01")
    return seconds


def check_int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}")
    if not low <= value <= high:
        raise InvalidInput(f"{name}={value} is out of range; valid: {low} to {high}")
    return value


def iso(seconds: float) -> str:
    """Epoch seconds as an ISO 8601 UTC string (seconds precision): ``strftime``'s
    ``%Y-%m-%dT%H:%M:%SZ`` of the same datetime, put together from its fields in a
    third of the time (a search reply has one a hit). ``%Y`` pads no year below 1000:
    ``strftime`` writes those."""
    t = datetime.fromtimestamp(seconds, UTC)
    if t.year < 1000:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    two = _TWO_DIGITS
    return f"{t.year}-{two[t.month]}-{two[t.day]}T{two[t.hour]}:{two[t.minute]}:{two[t.second]}Z"


_TWO_DIGITS = [f"{i:02d}" for i in range(60)]


def check_trace_id(value: Any) -> str | None:
    """A trace id in the form VT-YYYYMMDD-xxxxxxxx (8 lowercase hex digits), or None."""
    if value is None:
        return None
    if not (isinstance(value, str) and TRACE_ID_FORM.fullmatch(value)):
        raise InvalidInput(
            f"trace_id={str(value)[:40]!r} is not valid; the form is VT-YYYYMMDD-xxxxxxxx "
            "(8 digits, then 8 lowercase hex digits), e.g. VT-20261130-1a2b3c4d"
        )
    return value


def new_trace_id(seconds: float) -> str:
    """A fresh trace id dated ``seconds`` (UTC): VT-YYYYMMDD- and 8 random hex digits."""
    return f"VT-{datetime.fromtimestamp(seconds, UTC):%Y%m%d}-{os.urandom(4).hex()}"
