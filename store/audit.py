"""Evidence for the contract audit, read one bounded page at a time.

Each ``*_page`` function reads at most ``limit`` records after a cursor and returns
them with the next cursor (``None`` at the end), so that a store of any size is
audited in constant memory. Cursors follow an index: turns by (session, id), briefs by
(brief, source turn), the indexes and milestones by turn id. Records are plain lists
(they travel through the graph state); hashes are hex.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from store.dialect import dialect
from store.exchanges import turn_trace_sql
from store.runs import PRUNE_EVERY
from store.sql import Conn, all_rows, first, one

__all__ = [
    "Page",
    "brief_page",
    "compression_page",
    "index_page",
    "milestone_page",
    "run_page",
    "turn_page",
]

Page = tuple[list[list[Any]], Any]  # (records, next cursor or None)
_END = 2**63 - 1
_BEFORE = -(2**63)


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()


# --- turns and tombstones, by session then id: hashes, the chain, compression marks ---------

SELECT_TURNS = f"""
SELECT e.session_id, e.id, s.name, e.role, e.created_at, e.source_key,
       {turn_trace_sql("e", "s")}, e.content,
       e.content_hash, e.chain_hash, e.brief_id,
       (SELECT count(*) FROM brief_sources b WHERE b.exchange_id = e.id),
       EXISTS(SELECT 1 FROM brief_sources b WHERE b.brief_id = e.brief_id
              AND b.exchange_id = e.id),
       s.chain_head
FROM exchanges e JOIN sessions s ON s.id = e.session_id
WHERE e.session_id >= ?1 AND (e.session_id > ?1 OR e.id > ?2)
  AND (?3 IS NULL OR e.session_id = ?3)
ORDER BY e.session_id, e.id LIMIT ?4"""
SELECT_TOMBSTONES = """
SELECT f.session_id, f.exchange_id, f.content_hash, f.chain_hash, s.chain_head,
       EXISTS(SELECT 1 FROM exchanges e WHERE e.id = f.exchange_id)
FROM forgotten f JOIN sessions s ON s.id = f.session_id
WHERE f.session_id >= ?1 AND (f.session_id > ?1 OR f.exchange_id > ?2)
  AND f.session_id <= ?3 AND (f.session_id < ?3 OR f.exchange_id <= ?4)
  AND (?5 IS NULL OR f.session_id = ?5)
ORDER BY f.session_id, f.exchange_id"""
# Sessions that claim a newest turn but hold neither turns nor tombstones.
SELECT_HEADLESS = """
SELECT s.id FROM sessions s
WHERE s.chain_head IS NOT NULL AND (?1 IS NULL OR s.id = ?1)
  AND NOT EXISTS(SELECT 1 FROM exchanges e WHERE e.session_id = s.id)
  AND NOT EXISTS(SELECT 1 FROM forgotten f WHERE f.session_id = s.id)
LIMIT 100"""


def turn_page(conn: Conn, after: list[int] | None, limit: int,
              session_id: int | None) -> Page:
    """Turns and tombstones in chain order. A turn record:
    ``["turn", session, id, name, role, created_at, source_key, trace_id, digest of the
    content, content_hash, chain_hash, brief_id, source rows, in its own brief, head]``;
    a tombstone: ``["gone", session, id, content_hash, chain_hash, head, still stored]``;
    on the last page, ``["headless", session]`` for a session with a head and no turns.
    """
    lo_s, lo_id = after if after is not None else (_BEFORE, _BEFORE)
    records: list[list[Any]] = []
    # Row by row: a page holds digests, never the (possibly megabyte) contents.
    for (sid, eid, name, role, created_at, source_key, trace_id, content, content_hash,
         chain, brief_id, sources, own, head) in conn.execute(
            SELECT_TURNS, (lo_s, lo_id, session_id, limit)):
        digest = hashlib.sha256(str(content).encode("utf-8", "surrogatepass")).hexdigest()
        records.append(["turn", sid, eid, name, role, created_at, source_key, trace_id, digest,
                        _hex(content_hash), _hex(chain), brief_id, sources, bool(own),
                        _hex(head)])
    done = len(records) < limit
    hi_s, hi_id = (_END, _END) if done else (records[-1][1], records[-1][2])
    for sid, eid, content_hash, chain, head, stored in all_rows(
            conn, SELECT_TOMBSTONES, (lo_s, lo_id, hi_s, hi_id, session_id)):
        records.append(["gone", sid, eid, _hex(content_hash), _hex(chain), _hex(head),
                        bool(stored)])
    records.sort(key=lambda r: (r[1], r[2]))
    if done:
        records.extend(["headless", r[0]] for r in all_rows(conn, SELECT_HEADLESS,
                                                             (session_id,)))
        return records, None
    return records, [hi_s, hi_id]


# --- briefs and their sources ---------------------------------------------------------------

SELECT_BRIEF_SOURCES = """
SELECT b.id, s.exchange_id, s.content_hash, e.id IS NOT NULL, e.content_hash,
       e.session_id IS NOT DISTINCT FROM b.session_id, e.brief_id
FROM briefs b
LEFT JOIN brief_sources s ON s.brief_id = b.id
LEFT JOIN exchanges e ON e.id = s.exchange_id
WHERE b.id >= ?1 AND (b.id > ?1 OR coalesce(s.exchange_id, ?3) > ?2)
  AND (?4 IS NULL OR b.session_id = ?4)
ORDER BY b.id, s.exchange_id LIMIT ?5"""


def brief_page(conn: Conn, after: list[int] | None, limit: int,
               session_id: int | None) -> Page:
    """``[brief, source turn or None, recorded hash, turn exists, turn's hash, same
    session, turn's brief]`` per source row (one row with ``None`` for a brief without
    sources)."""
    lo_b, lo_e = after if after is not None else (_BEFORE, _BEFORE)
    rows = all_rows(conn, SELECT_BRIEF_SOURCES, (lo_b, lo_e, _END, session_id, limit))
    records = [[b, e, _hex(recorded), bool(exists), _hex(actual), bool(same), owner]
               for b, e, recorded, exists, actual, same, owner in rows]
    if len(rows) < limit:
        return records, None
    last = rows[-1]
    return records, [last[0], _END if last[1] is None else last[1]]


# --- the keyword and vector indexes against the turns, by id --------------------------------

SELECT_IDS = """
SELECT id FROM exchanges WHERE id > ?1 AND (?2 IS NULL OR session_id = ?2)
ORDER BY id LIMIT ?3"""
SELECT_ALL_IDS = "SELECT id FROM exchanges WHERE id > ? AND id <= ?"
SELECT_FTS_IDS = "SELECT rowid FROM exchanges_fts WHERE rowid > ? AND rowid <= ? ORDER BY rowid"
SELECT_VECTOR_SESSION = "SELECT session_id FROM exchange_vectors WHERE rowid = ?"


class AuditedKeywords(Protocol):
    """A derived keyword index as the audit reads it (SQLite's ``KeywordIndex``,
    PostgreSQL's ``LexemeIndex``)."""

    def trusted(self, conn: Conn) -> bool: ...
    def audit_ids(self, conn: Conn, lo: int, hi: int, session_id: int | None, expect: int
                  ) -> tuple[set[int], set[int]]: ...


def index_page(conn: Conn, after: int | None, limit: int,
               session_id: int | None, derived: AuditedKeywords | None = None) -> Page:
    """One record for the next ``limit`` turns (of the session, if given):
    ``[checked turns, [turns missing from the keyword index], [keyword rows without a
    turn], [turns missing from the vectors], [vectors without a turn], [turns missing
    from the derived keyword index], [its entries without a turn]]`` (the last two empty
    without one). A turn queued for the derived index (SQLite) or past its watermark
    (PostgreSQL) counts as held, an entry queued for removal as gone; an index not
    built for this store misses every turn."""
    lo = _BEFORE if after is None else after
    ids = [r[0] for r in all_rows(conn, SELECT_IDS, (lo, session_id, limit))]
    done = len(ids) < limit
    hi = _END if done else ids[-1]
    scoped = set(ids)
    everyone = scoped if session_id is None else {
        r[0] for r in all_rows(conn, SELECT_ALL_IDS, (lo, hi))}
    if session_id is None:
        fts = {r[0] for r in all_rows(conn, SELECT_FTS_IDS, (lo, hi))}
    else:
        fts = dialect(conn).session_keyword_ids(conn, lo, hi, session_id)
    vectors = dialect(conn).vector_ids(conn, lo, hi)
    vector_orphans = vectors - everyone
    if session_id is not None:  # an orphan vector belongs to the session its row names
        vector_orphans = {v for v in vector_orphans
                          if (row := first(conn, SELECT_VECTOR_SESSION, (v,))) is not None
                          and row[0] == session_id}
        vectors &= scoped | vector_orphans
    record = [len(ids), sorted(scoped - fts), sorted(fts - everyone), sorted(scoped - vectors),
              sorted(vector_orphans), *_derived_page(conn, derived, lo, hi, scoped, everyone,
                                                     session_id)]
    return [record], (None if done else hi)


def _derived_page(conn: Conn, derived: AuditedKeywords | None, lo: int, hi: int,
                  scoped: set[int], everyone: set[int], session_id: int | None
                  ) -> list[list[int]]:
    if derived is None:
        return [[], []]
    if not derived.trusted(conn):
        return [sorted(scoped), []]
    held, queued = derived.audit_ids(conn, lo, hi, session_id, len(everyone))
    return [sorted(scoped - held - queued), sorted(held - everyone - queued)]


# --- milestones -----------------------------------------------------------------------------

SELECT_MILESTONES = """
SELECT m.exchange_id, e.id IS NOT NULL, e.session_id IS NOT DISTINCT FROM m.session_id
FROM milestones m LEFT JOIN exchanges e ON e.id = m.exchange_id
WHERE m.exchange_id > ?1 AND (?2 IS NULL OR m.session_id = ?2)
ORDER BY m.exchange_id LIMIT ?3"""


def milestone_page(conn: Conn, after: int | None, limit: int,
                   session_id: int | None) -> Page:
    """``[turn id, turn exists, same session]`` per milestone."""
    rows = all_rows(conn, SELECT_MILESTONES,
                    (_BEFORE if after is None else after, session_id, limit))
    records = [[m, bool(exists), bool(same)] for m, exists, same in rows]
    return records, (None if len(rows) < limit else rows[-1][0])


# --- compression: sessions holding a full batch of uncompressed turns -----------------------

SELECT_OVERDUE = """
SELECT session_id, count(*) FROM exchanges
WHERE brief_id IS NULL AND session_id > ?1 AND (?2 IS NULL OR session_id = ?2)
GROUP BY session_id HAVING count(*) >= ?3 ORDER BY session_id LIMIT ?4"""
SELECT_OLDEST_LIVE = """
SELECT id FROM exchanges WHERE session_id = ? AND brief_id IS NULL ORDER BY id LIMIT ?"""
COUNT_SESSIONS = "SELECT count(*) FROM sessions WHERE ?1 IS NULL OR id = ?1"


_IDS_PER_SESSION = 100


def compression_page(conn: Conn, after: int | None, limit: int,
                     session_id: int | None, turn_limit: int) -> Page:
    """``[session, uncompressed turns, [ids of the turns due]]`` per session that holds
    ``turn_limit`` or more uncompressed turns; the first record is ``[sessions checked]``.
    """
    rows = all_rows(conn, SELECT_OVERDUE,
                    (_BEFORE if after is None else after, session_id, turn_limit, limit))
    records: list[list[Any]] = []
    if after is None:
        records.append([one(conn, COUNT_SESSIONS, (session_id,))[0]])
    for sid, live in rows:
        due = min(live // turn_limit * turn_limit, _IDS_PER_SESSION)
        records.append([sid, live, [r[0] for r in all_rows(conn, SELECT_OLDEST_LIVE,
                                                             (sid, due))]])
    return records, (None if len(rows) < limit else rows[-1][0])


# --- stage traces ---------------------------------------------------------------------------

COUNT_RUNS = "SELECT count(*) FROM runs"
SELECT_OLDEST_RUNS = "SELECT seq FROM runs ORDER BY seq LIMIT ?"


def run_page(conn: Conn, retention: int) -> Page:
    """``[stored traces, allowed, [seqs of the oldest beyond]]``: a store keeps
    ``retention`` traces, plus at most one prune interval before the next prune."""
    count = int(one(conn, COUNT_RUNS)[0])
    allowed = retention + PRUNE_EVERY
    excess = max(0, count - allowed)
    seqs = [r[0] for r in all_rows(conn, SELECT_OLDEST_RUNS, (min(excess, 100),))]
    return [[count, allowed, seqs]], None
