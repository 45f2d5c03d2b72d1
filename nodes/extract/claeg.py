"""A CLAEG terminal-shutdown event of the coordination bus, as the system turn that
records it: its source, its time, its text, its milestone label and
the source key that makes it exactly-once.

The event's ``payload`` is the writer's JSON (``{"source": ..., "reason": ...}`` from
the VERITAS tools); anything else is kept as text. Nothing here interprets the event:
the turn says what the bus said, with the event id to find it there.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nodes.evaluate_contracts.inputs import iso

__all__ = ["MILESTONE", "SOURCE_KEY_PREFIX", "Shutdown", "shutdown_of"]

MILESTONE = "TERMINAL_SHUTDOWN"
SOURCE_KEY_PREFIX = "claeg:"
MAX_SOURCE_CHARS = 80
MAX_PAYLOAD_CHARS = 2_000
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Shutdown:
    event_id: int | str
    source: str
    at: float  # epoch seconds
    content: str  # the system turn's text
    label: str  # the milestone label
    source_key: str  # one per event: a turn stored once, whatever happens to the receipt


def _payload(raw: str | None) -> dict[str, Any] | str:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def _line(value: Any, limit: int) -> str:
    text = _UNPRINTABLE.sub(" ", str(value)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_time(raw: Any, now: float) -> float:
    """Epoch seconds of the bus's ``created_at`` (ISO 8601 text or epoch seconds or
    milliseconds); ``now`` when it is neither."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw) / (1_000 if raw > 1e11 else 1)
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw.strip())
        except ValueError:
            return now
        seconds = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    else:
        return now
    return seconds if math.isfinite(seconds) and 0 <= seconds < 1e11 else now


def source_key(task_id: str, event_id: int | str, created_at: Any) -> str:
    """``claeg:<event id>:<digest>``: the digest of task, id and time keeps the key
    distinct when a recreated bus numbers its events from 1 again."""
    digest = hashlib.sha256(
        json.dumps([task_id, event_id, created_at], default=str).encode()).hexdigest()[:16]
    return f"{SOURCE_KEY_PREFIX}{_line(event_id, 100)}:{digest}"


def shutdown_of(event: dict[str, Any], now: float | None = None) -> Shutdown:
    """The turn and milestone recording one bus event (a ``store.bus.BusEvent`` as a dict)."""
    payload = _payload(event["payload"])
    fields = payload if isinstance(payload, dict) else {}
    # No "|" in the source: the ingest reply separates its clauses with it.
    source = _line(str(fields.get("source") or "unknown").replace("|", "/"),
                   MAX_SOURCE_CHARS) or "unknown"
    at = event_time(event["created_at"], time.time() if now is None else now)
    when = iso(at)
    reason_key = next((k for k in ("reason", "message", "detail")
                       if isinstance(fields.get(k), str) and fields[k].strip()), None)
    rest = ({k: v for k, v in fields.items() if k not in ("source", reason_key)}
            if isinstance(payload, dict) else payload)
    text = (f"CLAEG_TERMINAL_SHUTDOWN of task {event['task_id']}: the coordination bus "
            f"reports a terminal shutdown from {source} at {when} (bus event "
            f"{_line(event['id'], 100)}).")
    if reason_key is not None:
        text += f" Reason: {_line(fields[reason_key], 500)}"
    if rest:
        body = rest if isinstance(rest, str) else json.dumps(rest, ensure_ascii=False,
                                                              sort_keys=True, default=str)
        text += f"\nPayload: {_line(body, MAX_PAYLOAD_CHARS)}"
    return Shutdown(
        event_id=event["id"],
        source=source,
        at=at,
        content=text,
        label=f"{MILESTONE} from {source} at {when}",
        source_key=source_key(event["task_id"], event["id"], event["created_at"]),
    )
