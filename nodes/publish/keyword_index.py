"""Node: the derived keyword index written again from the stored turns
(``store.keyword_index``).

Each turn's entry is what its ingest queued: its words, the words of the two turns
before it in its session that it does not use (``nodes.extract.search_fields``), its
month and year; the turns are read a session at a time, oldest first, in one snapshot.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.search_fields import CONTEXT_TURNS
from nodes.extract.terms import context_terms
from nodes.publish.wording import counted
from store.backend import Backend
from store.db import Store
from store.errors import StoreError
from store.keyword_index import KeywordEntry, build_due, stored_turns
from store.neighbours import NEIGHBOUR_CHARS
from store.search_filter import dated_terms
from store.sql import Conn

__all__ = ["build_when_due", "rebuilt_keyword_index", "stored_entries"]


def stored_entries(conn: Conn) -> Iterator[KeywordEntry]:
    """Every stored turn's entry, a session at a time."""
    session: int | None = None
    previous: list[str] = []
    for exchange_id, session_id, created_at, content in stored_turns(conn):
        if session_id != session:
            session, previous = session_id, []
        yield (exchange_id, session_id, content,
               context_terms(content, previous[:CONTEXT_TURNS]), dated_terms(created_at))
        previous = [content[:NEIGHBOUR_CHARS], *previous][:CONTEXT_TURNS]


def build_when_due(store: Backend, *, beside: bool) -> None:
    """After a write: a SQLite store that has reached ``KeywordIndex.answers_from``
    turns and keeps no derived index yet has it built from its turns, as
    ``stenographer index rebuild`` builds it: on a thread of its own (``beside``: a
    single ingest does not wait for it) or now (a bulk write). Until it ends FTS5
    answers; a turn stored meanwhile is queued; a process killed during it leaves an
    untrusted index, rebuilt at the next start (``store.keyword_index.needs_rebuild``)."""
    if not isinstance(store, Store) or store.read_only or store.keeps_keywords():
        return
    with store.read() as conn:
        if not build_due(conn):
            return
    derived = store.keyword_index()
    if derived is None:
        return
    if beside:
        derived.build_later(store, stored_entries)
        return
    try:
        derived.rebuild(store, stored_entries, first_build=True)
    except StoreError as ex:  # another process is writing it: FTS5 answers meanwhile
        print(f"stenographer: the keyword index was not built: {ex}", file=sys.stderr)


class RebuiltKeywordIndexWrites(TypedDict):
    reply: dict[str, Any]


@node
def rebuilt_keyword_index(*, run: RunContext) -> RebuiltKeywordIndexWrites:
    store = run.store
    if store.read_only:
        raise StoreError("the store is read-only: its keyword index cannot be rebuilt")
    started = time.perf_counter()
    if isinstance(store, Store):
        derived = store.keyword_index()
        if derived is None:
            raise StoreError("the derived keyword index could not be opened: see the "
                             "message above; searches use FTS5 meanwhile")
        count, directory = derived.rebuild(store, stored_entries), derived.directory
    else:  # PostgreSQL: its index of the turns' lexemes (store.postgres.keywords)
        from store.postgres.db import PgStore

        assert isinstance(store, PgStore)
        count, found = store.keywords.rebuild()
        if found is None:
            raise StoreError("the derived keyword index could not be opened: see the "
                             "message above; PostgreSQL answers every search meanwhile")
        directory = found
    seconds = round(time.perf_counter() - started, 2)
    return {"reply": {"turns": count, "directory": str(directory), "seconds": seconds,
                      "text": f"Rebuilt the keyword index of {counted(count, 'turn')} in "
                              f"{seconds} s ({directory})."}}
