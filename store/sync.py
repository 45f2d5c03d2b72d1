"""Sync between stores: reading the record in id order for a bundle, and recognising
turns that a peer sends (migration 9).

The outbox is the record itself: turns (and tombstones of forgotten turns) in id order.
Ids only grow and writers commit one at a time, so a destination's cursor (the last id
it acknowledged, a ``cursors`` row of kind ``outbox:<destination kind>``) never skips a
turn that commits later. A second kind of destination reads the same pages with a
cursor of its own kind.

**The chain rule for received turns.** A turn received from a peer is appended to the
receiving session's chain in arrival order: its chain hash is computed with the same
formula (store.provenance) from the receiving session's head. Its identity — content
hash, session, role, time, source key, trace id — is unchanged. When the receiving
session's head is the hash the turn followed at the sender (the usual case: one side
wrote, the other follows), the chain hash comes out the sender's, bit for bit. When
both sides wrote to the session since they last synced, the chains fork: each store's
chain records its own arrival order and verifies on its own, and the turn's origin
(its chain hash where it was first recorded) is kept in ``turn_origins`` so that the
turn is recognised wherever it travels next. A received tombstone of a turn never held
here is appended the same way, with the sender's chain hash (``record_tombstone``). A
tombstone keeps its turn's origin itself (``forgotten.origin``, when it differs from the
chain hash); ``turn_origins`` holds stored turns only, and forgetting a turn moves its
origin there (migration 10).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from store.exchanges import turn_trace_sql
from store.provenance import GENESIS
from store.sql import Conn, all_rows, first, one

__all__ = [
    "RecordRow",
    "iter_records",
    "known_origin",
    "known_origins",
    "next_overdue",
    "pending_after",
    "previous_link",
    "record_origin",
    "record_rows",
    "record_tombstone",
    "turn_chain",
]


@dataclass(frozen=True)
class RecordRow:
    """One turn, or the tombstone of a forgotten one (``content`` None), as a bundle
    carries it."""

    id: int
    session: str
    role: str | None
    created_at: float | None
    content: str | None
    content_hash: bytes
    chain_hash: bytes
    source_key: str | None
    trace_id: str | None
    origin: bytes


# Turns and tombstones after an id, in id order (tombstones keep their turn's id).
SELECT_RECORDS = f"""
SELECT id, session, role, created_at, content, content_hash, chain_hash, source_key,
       trace_id, origin FROM (
  SELECT e.id AS id, s.name AS session, e.role AS role, e.created_at AS created_at,
         e.content AS content, e.content_hash AS content_hash, e.chain_hash AS chain_hash,
         e.source_key AS source_key, {turn_trace_sql("e", "s")} AS trace_id,
         coalesce(o.origin, e.chain_hash) AS origin
  FROM exchanges e JOIN sessions s ON s.id = e.session_id
  LEFT JOIN turn_origins o ON o.exchange_id = e.id
  WHERE e.id > ?1 AND (?2 IS NULL OR e.session_id = ?2)
  UNION ALL
  SELECT f.exchange_id, s.name, NULL, NULL, NULL, f.content_hash, f.chain_hash, NULL, NULL,
         coalesce(f.origin, f.chain_hash)
  FROM forgotten f JOIN sessions s ON s.id = f.session_id
  WHERE f.exchange_id > ?1 AND (?2 IS NULL OR f.session_id = ?2)
    AND NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = f.exchange_id)
) ORDER BY id LIMIT ?3"""
SESSION_BY_NAME = "SELECT id FROM sessions WHERE name = ?"


def record_rows(conn: Conn, after: int, limit: int,
                session_row: int | None = None) -> list[RecordRow]:
    """The next ``limit`` turns and tombstones after id ``after`` (of one session row,
    if given), in id order."""
    return [RecordRow(int(r[0]), str(r[1]), r[2], r[3], r[4], bytes(r[5]),
                      bytes(r[6]) if r[6] is not None else GENESIS, r[7], r[8],
                      bytes(r[9]) if r[9] is not None else GENESIS)
            for r in conn.execute(SELECT_RECORDS, (after, session_row, limit))]


SELECT_PREVIOUS_LINK = """
SELECT max(coalesce((SELECT max(id) FROM exchanges WHERE session_id = ?1 AND id < ?2), 0),
           coalesce((SELECT max(exchange_id) FROM forgotten
                     WHERE session_id = ?1 AND exchange_id < ?2), 0))"""
CHAIN_OF = """
SELECT coalesce((SELECT chain_hash FROM exchanges WHERE id = ?1),
                (SELECT chain_hash FROM forgotten WHERE exchange_id = ?1))"""


def previous_link(conn: Conn, session: str, before_id: int) -> bytes:
    """The chain hash that the session's record with id ``before_id`` follows: that of
    the turn or tombstone just before it, or GENESIS."""
    row = first(conn, SESSION_BY_NAME, (session,))
    if row is None:
        return GENESIS
    previous = one(conn, SELECT_PREVIOUS_LINK, (row[0], before_id))[0]
    if not previous:
        return GENESIS
    found = first(conn, CHAIN_OF, (previous,))
    return bytes(found[0]) if found is not None and found[0] is not None else GENESIS


KNOWN_ORIGIN = """
SELECT EXISTS(SELECT 1 FROM turn_origins WHERE origin = ?1)
    OR EXISTS(SELECT 1 FROM exchanges
              WHERE substr(chain_hash, 1, 4) = substr(?1, 1, 4) AND chain_hash = ?1)
    OR EXISTS(SELECT 1 FROM forgotten WHERE chain_hash = ?1)
    OR EXISTS(SELECT 1 FROM forgotten WHERE origin = ?1)"""
INSERT_ORIGIN = """
INSERT INTO turn_origins(origin, exchange_id, peer, received_at)
VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"""


CHAIN_OF_TURN = "SELECT chain_hash FROM exchanges WHERE id = ?"


def turn_chain(conn: Conn, exchange_id: int) -> bytes:
    """The chain hash a stored turn was given."""
    return bytes(one(conn, CHAIN_OF_TURN, (exchange_id,))[0])


def known_origin(conn: Conn, origin: bytes) -> bool:
    """Whether the turn that originated as ``origin`` is here, or was here and was
    forgotten (a peer does not bring a forgotten turn back)."""
    return bool(one(conn, KNOWN_ORIGIN, (origin,))[0])


KNOWN_ORIGINS = """
SELECT origin FROM turn_origins WHERE origin IN ({marks})
UNION SELECT chain_hash FROM exchanges
      WHERE substr(chain_hash, 1, 4) IN ({prefixes}) AND chain_hash IN ({marks})
UNION SELECT chain_hash FROM forgotten WHERE chain_hash IN ({marks})
UNION SELECT origin FROM forgotten WHERE origin IN ({marks})"""
ORIGIN_PAGE = 500  # origins looked up in one statement


def known_origins(conn: Conn, origins: Sequence[bytes]) -> set[bytes]:
    """Those of ``origins`` that ``known_origin`` finds, with a statement a page of
    them instead of one each."""
    found: set[bytes] = set()
    for start in range(0, len(origins), ORIGIN_PAGE):
        page = list(dict.fromkeys(origins[start:start + ORIGIN_PAGE]))
        prefixes = list(dict.fromkeys(o[:4] for o in page))
        marks = ",".join("?" * len(page))
        sql = KNOWN_ORIGINS.format(marks=marks, prefixes=",".join("?" * len(prefixes)))
        found.update(bytes(r[0]) for r in all_rows(
            conn, sql, [*page, *prefixes, *page, *page, *page]))
    return found


def record_origin(conn: Conn, origin: bytes, exchange_id: int, peer: str,
                  at: float) -> None:
    """Remember where a received turn came from (only needed when it was re-linked:
    otherwise its chain hash is its origin)."""
    conn.execute(INSERT_ORIGIN, (origin, exchange_id, peer, at))


# A tombstone takes an id from the turns' sequence (ids are never reused), so that it
# sits in its session's chain at its arrival, like a turn.
NEXT_ID = """
INSERT INTO sqlite_sequence(name, seq)
SELECT 'exchanges', coalesce((SELECT max(id) FROM exchanges), 0)
WHERE NOT EXISTS(SELECT 1 FROM sqlite_sequence WHERE name = 'exchanges')"""
TAKE_ID = "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'exchanges' RETURNING seq"
UPSERT_TOMBSTONE_SESSION = """
INSERT INTO sessions(name, created_at, last_at, turns, chain_head) VALUES (?1, ?2, ?2, 0, ?3)
ON CONFLICT(name) DO UPDATE SET chain_head = excluded.chain_head
RETURNING id"""
INSERT_TOMBSTONE = """
INSERT INTO forgotten(exchange_id, session_id, forgotten_at, reason, selector, content_hash,
                      chain_hash, brief_id, origin)
VALUES (?, ?, ?, ?, 'sync', ?, ?, NULL, ?)"""


def record_tombstone(conn: Conn, session: str, content_hash: bytes, chain: bytes,
                     origin: bytes, peer: str, at: float) -> int:
    """Store a tombstone received from a peer for a turn this store never held: it
    becomes the session's newest link (its chain hash is the sender's: without the
    content it cannot be recomputed) and keeps the turn from arriving later from
    anywhere. Returns its id. Call inside a write."""
    conn.execute(NEXT_ID)
    ident = int(one(conn, TAKE_ID)[0])
    session_row = int(one(conn, UPSERT_TOMBSTONE_SESSION, (session, at, chain))[0])
    conn.execute(INSERT_TOMBSTONE, (ident, session_row, at, f"forgotten at a peer ({peer})"[:500],
                                    content_hash, chain, origin if origin != chain else None))
    return ident


PENDING = """
SELECT (SELECT count(*) FROM exchanges WHERE id > ?1),
       coalesce((SELECT max(id) FROM exchanges), 0)"""


def pending_after(conn: Conn, after: int) -> tuple[int, int]:
    """(turns stored after id ``after``, the newest turn id)."""
    row = one(conn, PENDING, (after,))
    return int(row[0]), int(row[1])


NEXT_OVERDUE = """
SELECT session_id FROM exchanges
WHERE brief_id IS NULL AND session_id > ?1
GROUP BY session_id HAVING count(*) >= ?2 ORDER BY session_id LIMIT 1"""


def next_overdue(conn: Conn, after: int, turn_limit: int) -> int | None:
    """The first session row after ``after`` holding ``turn_limit`` or more
    uncompressed turns (compression catches up after an import)."""
    row = first(conn, NEXT_OVERDUE, (after, turn_limit))
    return None if row is None else int(row[0])


def iter_records(conn: Conn, after: int, through: int | None, page: int,
                 session_row: int | None = None) -> Iterator[RecordRow]:
    """Every record after ``after`` (up to ``through`` when given), a page at a time."""
    while True:
        rows = record_rows(conn, after, page, session_row)
        for row in rows:
            if through is not None and row.id > through:
                return
            yield row
        if len(rows) < page:
            return
        after = rows[-1].id

