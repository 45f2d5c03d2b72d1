"""Node: the derived keyword index written again from the stored turns
(``store.keyword_index``).

Each turn's entry is what its ingest queued: its words, the words of the two turns
before it in its session that it does not use (``nodes.extract.search_fields``), its
month and year, as FTS5 tokenizes them; the turns are read a session at a time, oldest
first, in one snapshot. A bulk write's first build and a rebuild have the run's worker
process compute each page's entries while the page before goes into the index.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

import nodes.batch as batch_module
from nodes.batch import split_drop, split_finish, split_start
from nodes.context import RunContext, node
from nodes.extract.search_fields import CONTEXT_TURNS, keyword_columns
from nodes.publish.wording import counted
from store.backend import Backend
from store.db import Store
from store.errors import StoreError
from store.keyword_index import Indexed, build_due, stored_turns
from store.neighbours import NEIGHBOUR_CHARS
from store.sql import Conn

__all__ = ["build_when_due", "entries_with", "rebuilt_keyword_index", "stored_entries"]


# Turns read at a time when a run's worker process computes the entries.
ENTRY_PAGE = 2_000
COLUMNS = ("keyword_columns",)  # the node function the worker runs on each entry


def stored_entries(conn: Conn, run: RunContext | None = None
                   ) -> Generator[Indexed, None, None]:
    """Every stored turn's entry, a session at a time, as the index takes it
    (``keyword_columns``: the ingest's fields over the stored turns, tokenized). With
    ``run`` (a bulk write's first build, a rebuild), the run's worker process computes
    each page's entries (nodes.batch.split_start) while the caller takes in the page
    before."""
    pending: list[dict[str, Any]] | None = None
    for page in _pages(conn):
        if run is None:
            for item in page:
                item.update(keyword_columns(item["turn"], item["previous"]))
            yield from _entries(page)
            continue
        split = split_start(run, page, COLUMNS, len(page) >= batch_module.SPLIT_FROM)
        try:
            if pending is not None:
                yield from _entries(pending)
        except BaseException:  # the caller failed or stopped: the worker is freed
            split_drop(run, split)
            raise
        split_finish(run, split)
        pending = page
    if pending is not None:
        yield from _entries(pending)



def _pages(conn: Conn) -> Iterator[list[dict[str, Any]]]:
    """The stored turns ENTRY_PAGE at a time, each with the turns before it in its
    session (``search_fields``' channels)."""
    page: list[dict[str, Any]] = []
    session: int | None = None
    previous: list[str] = []
    for exchange_id, session_id, created_at, content in stored_turns(conn):
        if session_id != session:
            session, previous = session_id, []
        page.append({"id": exchange_id, "session": session_id,
                     "previous": previous[:CONTEXT_TURNS],
                     "turn": {"content": content, "created_at": created_at}})
        previous = [content[:NEIGHBOUR_CHARS], *previous][:CONTEXT_TURNS]
        if len(page) >= ENTRY_PAGE:
            yield page
            page = []
    if page:
        yield page


def _entries(page: list[dict[str, Any]]) -> Iterator[Indexed]:
    for item in page:
        yield (item["id"], item["session"], *item["columns"])


def build_when_due(store: Backend, *, beside: bool, run: RunContext | None = None) -> None:
    """After a write: a SQLite store that has reached ``KeywordIndex.answers_from``
    turns and keeps no derived index yet has it built from its turns, as
    ``stenographer index rebuild`` builds it: on a thread of its own (``beside``: a
    single ingest does not wait for it) or now (a bulk write). Until it ends FTS5
    answers; a turn stored meanwhile is queued; a process killed during it leaves an
    untrusted index, rebuilt at the next start (``store.keyword_index.needs_rebuild``).
    ``run``: a bulk write's, whose worker process computes most of the entries'
    fields (``stored_entries``)."""
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
        with entries_with(run) as entries_of:
            derived.rebuild(store, entries_of, first_build=True)
    except StoreError as ex:  # another process is writing it: FTS5 answers meanwhile
        print(f"stenographer: the keyword index was not built: {ex}", file=sys.stderr)


@contextmanager
def entries_with(run: RunContext | None
                 ) -> Iterator[Callable[[Conn], Iterator[Indexed]]]:
    """``stored_entries`` with ``run``'s worker (if any), for a rebuild; on leaving, an entries
    stream the rebuild did not read to its end (it failed) is closed, which takes the
    worker's answer (the worker serves the process's next request only after it)."""
    streams: list[Generator[Indexed, None, None]] = []

    def entries_of(conn: Conn) -> Iterator[Indexed]:
        stream = stored_entries(conn, run)
        streams.append(stream)
        return stream

    try:
        yield entries_of
    finally:
        for stream in streams:
            stream.close()


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
        with entries_with(run) as entries_of:
            count = derived.rebuild(store, entries_of)
        directory = derived.directory
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
