"""The bus outbox: turns of the record as ``STENO_EXCHANGE`` events for the
coordination bus (migration ``m011_bus_outbox``).

The outbox is the sync outbox (store.sync ``record_rows``: turns and tombstones in id
order after a cursor), read with a cursor of its own kind, ``outbox:bus``. Tombstones
(turns forgotten before they were published) are passed over: a forgotten turn is
never published. Each event is keyed ``<store id>:<exchange id>:<chain hash>``; the
store id is random and kept in ``meta``, so keys stay unique when a store is recreated.

The payload (JSON; ``task_id`` is the session id):
``{source, key, store_id, exchange_id, session, role, created_at, content_hash,
chain_hash, origin, trace_id, decisions, blockers, excerpt, content_chars, truncated}``
— hashes in hex, ``created_at`` ISO 8601 UTC, ``origin`` the chain hash where the turn
was first recorded (the same for a turn synced between stores), ``excerpt`` the
(already redacted) content cut to ``STENO_BUS_EXCERPT_CHARS`` characters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from store.bus import OutgoingEvent
from store.sql import Conn, all_rows, first
from store.sync import record_rows

__all__ = ["SOURCE", "BusBatch", "bus_batch", "store_id"]

SOURCE = "omega-stenographer"
SELECT_STORE_ID = "SELECT value FROM meta WHERE key = 'store_id'"
# {ids}: integer placeholders built by bus_batch.
SELECT_SIGNALS = "SELECT id, signals FROM exchanges WHERE id IN ({ids})"


@dataclass(frozen=True)
class BusBatch:
    """The next events, and the id the cursor moves to once they are on the bus (None:
    nothing after the cursor)."""

    events: list[OutgoingEvent]
    through: int | None
    records: int  # turns and tombstones read


def store_id(conn: Conn) -> str:
    row = first(conn, SELECT_STORE_ID)
    if row is None:  # a store older than the migration never gets here (it runs at open)
        raise LookupError("the store has no store_id (migration m011_bus_outbox)")
    return str(row[0])


def _iso(seconds: float | None) -> str:
    when = datetime.fromtimestamp(seconds or 0.0, UTC)
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def bus_batch(conn: Conn, after: int, limit: int, excerpt_chars: int) -> BusBatch:
    """The turns after id ``after`` (at most ``limit`` records) as bus events."""
    rows = record_rows(conn, after, limit)
    if not rows:
        return BusBatch([], None, 0)
    turns = [r for r in rows if r.content is not None]
    signals: dict[int, dict[str, list[str]]] = {}
    if turns:
        sql = SELECT_SIGNALS.format(ids=", ".join("?" * len(turns)))
        signals = {int(r[0]): json.loads(r[1]) for r in
                   all_rows(conn, sql, tuple(t.id for t in turns)) if r[1]}
    sid = store_id(conn)
    events = []
    for t in turns:
        assert t.content is not None
        key = f"{sid}:{t.id}:{t.chain_hash.hex()}"
        found = signals.get(t.id, {})
        payload = {
            "source": SOURCE, "key": key, "store_id": sid, "exchange_id": t.id,
            "session": t.session, "role": t.role, "created_at": _iso(t.created_at),
            "content_hash": t.content_hash.hex(), "chain_hash": t.chain_hash.hex(),
            "origin": t.origin.hex(), "trace_id": t.trace_id,
            "decisions": found.get("d", []), "blockers": found.get("b", []),
            "excerpt": t.content[:excerpt_chars], "content_chars": len(t.content),
            "truncated": len(t.content) > excerpt_chars,
        }
        events.append(OutgoingEvent(key, sid, t.id, t.session,
                                    json.dumps(payload, ensure_ascii=False),
                                    _iso(t.created_at)))
    return BusBatch(events, rows[-1].id, len(rows))
