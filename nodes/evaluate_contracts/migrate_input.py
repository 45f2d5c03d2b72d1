"""Nodes: validate a migrate request, and check a page of turns before it is copied.

Every copied turn's content must match its SHA-256 content hash, and its chain hash
must follow from its metadata and the previous turn (or tombstone) of its session, as
the contract audit checks them (nodes.evaluate_contracts.audit_contracts): a damaged
source stops the copy at the first bad turn, before its page is written.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.requests import MigrateRequest, parsed
from store.errors import InvalidInput, StoreError
from store.provenance import GENESIS, chain_hash

__all__ = ["checked_migration", "verified_turns"]


class CheckedMigrationWrites(TypedDict):
    migration: dict[str, Any]


@node
def checked_migration(request: Any, *, run: RunContext) -> CheckedMigrationWrites:
    """The page size, and the two stores of the run: ``to`` and ``source`` name them
    for the command, which opens them; the run copies between those it is given."""
    batch = parsed(MigrateRequest, request).batch
    source, target = run.source, run.store
    if source is None:
        raise InvalidInput("migrate needs a store to copy from (--from, or the configured one)")
    if source.location == target.location:
        raise InvalidInput(f"the source and the target are the same store ({target.location});"
                           " give --to another SQLite file or PostgreSQL database")
    return {"migration": {"batch": batch, "source": source.location,
                          "source_dialect": source.dialect, "target": target.location,
                          "target_dialect": target.dialect}}


def _bad(exchange_id: int, what: str) -> StoreError:
    return StoreError(
        f"source turn #{exchange_id}: {what}; nothing of its page was copied. The source "
        "is damaged or was altered: `stenographer audit` on it lists what is wrong",
        exchange_id=exchange_id)


class VerifiedTurnsWrites(TypedDict):
    verified: Any


@node
def verified_turns(rows: Any, evidence: Any) -> VerifiedTurnsWrites:
    """Walk the page's turns and the tombstones between them in chain order."""
    records: list[tuple[int, int, Any]] = [(int(r[1]), int(r[0]), r) for r in rows]
    records += [(s, e, chain) for s, e, chain in evidence.tombstones]
    records.sort(key=lambda rec: (rec[0], rec[1]))
    session, link = records[0][0], evidence.previous_link
    for session_id, exchange_id, record in records:
        if session_id != session:  # a session that starts inside the page starts here
            session, link = session_id, GENESIS
        if isinstance(record, bytes):  # a tombstone: the chain runs through its hash
            link = record
            continue
        (_, _, role, created_at, content, content_hash, _, _, source_key, trace_id,
         chain) = record
        digest = hashlib.sha256(str(content).encode("utf-8", "surrogatepass")).digest()
        if digest != bytes(content_hash):
            raise _bad(exchange_id, "its content does not match its content hash")
        # A turn's trace id as store.exchanges.turn_trace_sql reads it: NULL stands for
        # its session's, '' for none.
        trace = evidence.traces[session_id] if trace_id is None else trace_id
        expected = chain_hash(link, bytes(content_hash), evidence.names[session_id], role,
                              created_at, source_key, trace or None)
        if chain is None or expected != bytes(chain):
            raise _bad(exchange_id, "its chain hash does not follow from its metadata and "
                       "the previous turn of its session")
        link = expected
    return {"verified": len(rows)}
