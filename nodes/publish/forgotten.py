"""Nodes: forget the selected turns (one write transaction), then scrub the file.

In the transaction: the GraphRAG graph re-derived around the turns (while their text is
still there: nodes.publish.forgotten_graph), tombstones, deletion from the store and
both indexes (NAFE flags by cascade, sync origin rows moved into the tombstones), the
briefs that cited a forgotten turn rebuilt from their remaining sources (or removed when none
remain), the keyword entries of the next turns (which borrowed its words) rebuilt. Stage
traces hold no text (graphs.summary): there is none to purge. ``secure_delete`` zeroes
the freed bytes, and the rewrite is marked pending. ``scrubbed_store`` then merges the
keyword index and rewrites the file (VACUUM, checkpoint; store.rewrite): what another
connection's read snapshot holds up, or a crash interrupts, is finished later.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.redaction import redacted_text
from nodes.extract.search_fields import CONTEXT_TURNS
from nodes.extract.terms import context_terms
from nodes.publish.brief import rebuilt_brief
from nodes.publish.forgotten_graph import forget_graph
from store.backend import Backend
from store.errors import StoreError
from store.forget import (
    Forgotten,
    Selection,
    drop_caches,
    following_turns,
    forget_turns,
    preceding_contents,
    reindex_turn,
    selected_turns,
)
from store.neighbours import NEIGHBOUR_CHARS
from store.rewrite import mark_rewrite_pending
from store.search_filter import dated_terms
from store.sql import Conn

__all__ = ["MAX_LISTED", "forgotten_turns", "scrubbed_store"]

MAX_LISTED = 1_000  # forgotten ids listed in the reply (all are counted and tombstoned)


def _rebuild_briefs(conn: Conn, briefs: list[int]) -> tuple[list[int], list[int]]:
    rebuilt, removed = [], []
    for brief_id in briefs:
        if rebuilt_brief(conn, brief_id) is None:
            removed.append(brief_id)
        else:
            rebuilt.append(brief_id)
    return rebuilt, removed


def _reindex_followers(conn: Conn, gone: Forgotten) -> int:
    followers: set[int] = set()
    for exchange_id, session_id in gone.turns:
        followers.update(following_turns(conn, session_id, exchange_id, CONTEXT_TURNS))
    for exchange_id in sorted(followers):
        (session_id, created_at, content), before = preceding_contents(
            conn, exchange_id, CONTEXT_TURNS, NEIGHBOUR_CHARS)
        reindex_turn(conn, exchange_id, session_id, content,
                     context_terms(content, before), dated_terms(created_at))
    return len(followers)


class ForgottenTurnsWrites(TypedDict):
    forgotten: Any


@node
def forgotten_turns(forget: Any, *, run: RunContext) -> ForgottenTurnsWrites:
    selection = Selection(ids=tuple(forget["ids"]), session_id=forget["session_row"],
                          since=forget["since"], until=forget["until"], text=forget["text"])
    store = run.store
    with store.scrubbing(), store.write() as conn:
        graph = forget_graph(conn, selected_turns(conn, selection))
        now = time.time()
        reason = redacted_text(run, forget["reason"]).text
        gone = forget_turns(conn, selection, reason, now)
        rebuilt, removed = _rebuild_briefs(conn, gone.briefs)
        reindexed = _reindex_followers(conn, gone)
        if gone.turns and forget["vacuum"]:
            mark_rewrite_pending(conn, now)  # done by scrubbed_store, or after a crash
    drop_caches(store)
    ids = [i for i, _ in gone.turns]
    return {"forgotten": {"count": len(ids), "ids": ids[:MAX_LISTED],
                          "sessions": len(gone.sessions), "briefs_rebuilt": rebuilt,
                          "briefs_removed": removed, "milestones_removed": gone.milestones,
                          "reindexed": reindexed,
                          "graph": graph}}


def rewritten_keyword_index(store: Backend) -> bool | None:
    """The derived keyword index written again from the remaining turns: a deleted entry
    stays in its segment's files until a merge, the rewrite leaves none. None: there is
    none (PostgreSQL, a SQLite store below its size); False: another process was
    writing it (the next forget, or `stenographer index rebuild`, rewrites it)."""
    from nodes.publish.keyword_index import stored_entries
    from store.db import Store

    if not isinstance(store, Store):  # PostgreSQL's derived index, if it holds the turns
        store.after_bulk_write()
        return None
    if not store.expects_keywords():  # a store below the index's size keeps none
        return None
    derived = store.keyword_index()
    if derived is None:
        return None
    try:
        derived.rebuild(store, stored_entries)
    except StoreError:
        return False
    return True


class ScrubbedStoreWrites(TypedDict):
    scrubbed: Any


@node
def scrubbed_store(forgotten: Any, forget: Any, *, run: RunContext) -> ScrubbedStoreWrites:
    """Rewrite the file when something was forgotten (and the caller did not opt out);
    what a reader holds up is finished in the background (``rewrite_pending``)."""
    if not forgotten["count"] or not forget["vacuum"]:
        return {"scrubbed": {"vacuumed": False, "log_emptied": False,
                             "rewrite_pending": False}}
    done = run.store.file_rewrite.run()
    return {"scrubbed": {"vacuumed": done.vacuumed, "log_emptied": done.log_emptied,
                         "rewrite_pending": done.pending,
                         "keyword_index_rewritten": rewritten_keyword_index(run.store)}}
