"""Forgetting: turns leave the store and both indexes, tombstones keep their hashes.

Everything a forgotten turn left behind is removed in the caller's write transaction:
its row, keyword and vector index entries, provider vectors and NAFE flags (cascade),
milestone and brief source rows, its sync origin row (kept in the tombstone). What
GraphRAG derived is taken back first (store.forget_graph). The briefs that cited it
are rewritten by the caller from their remaining sources (``brief_sources_of``,
``rewrite_brief``, ``delete_brief``), and the keyword entries of the turns right after
it, which borrowed its words, are rebuilt (``reindex_turn``). ``store.rewrite`` then
rewrites the file so that no page still holds the text: index merge, ``VACUUM``, WAL
checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.backend import Backend
from store.dialect import dialect
from store.exchanges import SELECT_EXCHANGE, Exchange, exchange_from_row, index_keywords
from store.sql import Conn, Row, all_rows, first, id_list, where

__all__ = [
    "Forgotten",
    "Selection",
    "brief_sources_of",
    "delete_brief",
    "drop_caches",
    "following_turns",
    "forget_turns",
    "matching_sql",
    "preceding_contents",
    "reindex_turn",
    "rewrite_brief",
    "selected_turns",
]


@dataclass(frozen=True)
class Selection:
    """Which turns to forget: every given filter must hold (at least one is given)."""

    ids: tuple[int, ...] = ()
    session_id: int | None = None
    since: float | None = None
    until: float | None = None
    text: str | None = None

    @property
    def selector(self) -> str:
        """What kind of selection it was (recorded in tombstones; never the text)."""
        kinds = [name for name, used in (("ids", self.ids), ("session", self.session_id),
                                         ("range", self.since is not None
                                          or self.until is not None),
                                         ("text", self.text)) if used]
        return "+".join(kinds)


@dataclass(frozen=True)
class Forgotten:
    turns: list[tuple[int, int]]  # (exchange id, session id), by id
    sessions: list[int]
    briefs: list[int]  # briefs that cited a forgotten turn
    milestones: int  # milestones removed (of forgotten turns, or whose label held the text)


def matching_sql(sel: Selection) -> tuple[str, list[Any]]:
    """The statement that lists the selected turns, and its parameters."""
    in_ids, params = id_list("e.id", sel.ids) if sel.ids else ("", [])
    found, values = where(
        ("e.session_id = ?", sel.session_id), ("e.created_at >= ?", sel.since),
        ("e.created_at < ?", sel.until), ("instr(e.content, ?) > 0", sel.text))
    conditions = [c for c in (in_ids, *found) if c]
    params += values
    if not conditions:
        raise ValueError("a selection needs at least one filter")
    sql = ("SELECT e.id, e.session_id, e.content_hash, e.chain_hash, e.brief_id "
           f"FROM exchanges e WHERE {' AND '.join(conditions)} ORDER BY e.id")
    return sql, params


def selected_turns(conn: Conn, sel: Selection) -> list[tuple[int, int]]:
    """(exchange id, session id) of the selected turns, by id."""
    sql, params = matching_sql(sel)
    return [(int(r[0]), int(r[1])) for r in all_rows(conn, sql, params)]


# The tombstone keeps the turn's sync origin (when it was re-linked here) and its
# ``turn_origins`` row goes: a peer's old bundle still holding the turn is recognised.
INSERT_TOMBSTONE = """
INSERT INTO forgotten(exchange_id, session_id, forgotten_at, reason, selector, content_hash,
                      chain_hash, brief_id, origin)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
        (SELECT origin FROM turn_origins WHERE exchange_id = ?1))"""
DELETE_ORIGIN = "DELETE FROM turn_origins WHERE exchange_id = ?"
DELETE_FTS = "DELETE FROM exchanges_fts WHERE rowid = ?"
DELETE_VECTOR = "DELETE FROM exchange_vectors WHERE rowid = ?"
DELETE_MILESTONE = "DELETE FROM milestones WHERE exchange_id = ?"
DELETE_LABELLED = "DELETE FROM milestones WHERE instr(label, ?) > 0"
DELETE_SOURCE = "DELETE FROM brief_sources WHERE exchange_id = ?"
DELETE_EXCHANGE = "DELETE FROM exchanges WHERE id = ?"
UPDATE_SESSION_TURNS = "UPDATE sessions SET turns = max(turns - ?, 0) WHERE id = ?"


def forget_turns(conn: Conn, sel: Selection, reason: str, now: float) -> Forgotten:
    """Delete the selected turns and leave a tombstone for each. Call inside a write."""
    sql, params = matching_sql(sel)
    rows = all_rows(conn, sql, params)
    per_session: dict[int, int] = {}
    briefs: set[int] = set()
    milestones = 0
    for exchange_id, session_id, content_hash, chain, brief_id in rows:
        conn.execute(INSERT_TOMBSTONE, (exchange_id, session_id, now, reason, sel.selector,
                                        content_hash, chain, brief_id))
        dialect(conn).unindex_keywords(conn, [exchange_id])
        conn.execute(DELETE_VECTOR, (exchange_id,))
        conn.execute(DELETE_MILESTONE, (exchange_id,))
        milestones += conn.changes()
        conn.execute(DELETE_SOURCE, (exchange_id,))
        conn.execute(DELETE_ORIGIN, (exchange_id,))
        conn.execute(DELETE_EXCHANGE, (exchange_id,))
        per_session[session_id] = per_session.get(session_id, 0) + 1
        if brief_id is not None:
            briefs.add(int(brief_id))
    for session_id, count in per_session.items():
        conn.execute(UPDATE_SESSION_TURNS, (count, session_id))
    if sel.text is not None:
        conn.execute(DELETE_LABELLED, (sel.text,))
        milestones += conn.changes()
    return Forgotten([(int(r[0]), int(r[1])) for r in rows], sorted(per_session),
                     sorted(briefs), milestones)


SELECT_BRIEF_SOURCE_TURNS = SELECT_EXCHANGE + """
JOIN brief_sources b ON b.exchange_id = e.id WHERE b.brief_id = ? ORDER BY e.id"""
UPDATE_BRIEF = """
UPDATE briefs SET tier = ?, body = ?, first_exchange_id = ?, last_exchange_id = ?, turns = ?
WHERE id = ?"""
DELETE_BRIEF = "DELETE FROM briefs WHERE id = ?"


def brief_sources_of(conn: Conn, brief_id: int) -> list[Exchange]:
    """The brief's remaining source turns, oldest first."""
    return [exchange_from_row(r) for r in all_rows(conn, SELECT_BRIEF_SOURCE_TURNS,
                                                   (brief_id,))]


def rewrite_brief(conn: Conn, brief_id: int, tier: str, body: str,
                  ids: Sequence[int]) -> None:
    conn.execute(UPDATE_BRIEF, (tier, body, ids[0], ids[-1], len(ids), brief_id))


def delete_brief(conn: Conn, brief_id: int) -> None:
    """A brief none of whose sources remain."""
    conn.execute(DELETE_BRIEF, (brief_id,))


SELECT_FOLLOWING = """
SELECT id FROM exchanges WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?"""
SELECT_PRECEDING = """
SELECT substr(content, 1, ?3) FROM exchanges WHERE session_id = ?1 AND id < ?2
ORDER BY id DESC LIMIT ?4"""
SELECT_TURN = "SELECT session_id, created_at, content FROM exchanges WHERE id = ?"


def following_turns(conn: Conn, session_id: int, after: int, count: int
                    ) -> list[int]:
    """The ``count`` stored turns after ``after`` in the session."""
    return [int(r[0]) for r in all_rows(conn, SELECT_FOLLOWING, (session_id, after, count))]


def preceding_contents(conn: Conn, exchange_id: int, count: int, chars: int
                       ) -> tuple[Row, list[str]]:
    """A stored turn ``(session, created_at, content)`` and the heads of the ``count``
    turns before it in its session, nearest first."""
    turn = first(conn, SELECT_TURN, (exchange_id,))
    assert turn is not None, exchange_id
    before = [str(r[0]) for r in all_rows(conn, SELECT_PRECEDING,
                                          (turn[0], exchange_id, chars, count))]
    return turn, before


def reindex_turn(conn: Conn, exchange_id: int, session_id: int, content: str,
                 context: str, dated: str) -> None:
    """Replace a turn's keyword index entry (its borrowed context words changed)."""
    conn.execute(DELETE_FTS, (exchange_id,))
    index_keywords(conn, exchange_id, session_id, content, context, dated)


def drop_caches(store: Backend) -> None:
    """Forget this process's in-memory vector copies (they still hold deleted turns)."""
    # imported here: the vector copies' module imports numpy, which the rest of this
    # module's users (a compression, a hook's capture of a few turns) never need
    from store.provider_vectors import forget_provider_caches

    store.vectors.forget()
    forget_provider_caches(store)

