"""Node: the keyword index's search fields of a page of copied turns.

The index is rebuilt in the target's form from each turn's text, with the fields an
ingest gives it (nodes.extract.search_fields): the words of the two turns before it in
its session that it does not use, and its month and year. A session's turns come in
order, so each turn's neighbours are the page's turns before it, or for the page's
first turn the two that the source holds before it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.search_fields import CONTEXT_TURNS
from nodes.extract.terms import context_terms
from store.neighbours import NEIGHBOUR_CHARS
from store.search import dated_terms

__all__ = ["migration_fields"]


class MigrationFieldsWrites(TypedDict):
    fields: Any


@node
def migration_fields(rows: Any, evidence: Any) -> MigrationFieldsWrites:
    session, previous = rows[0][1], list(evidence.previous_contents)
    fields: list[tuple[str, str]] = []
    for row in rows:  # (id, session_id, role, created_at, content, ...): store.transfer.TABLES
        if row[1] != session:
            session, previous = row[1], []
        fields.append((context_terms(row[4], previous[:CONTEXT_TURNS]), dated_terms(row[3])))
        previous = [row[4][:NEIGHBOUR_CHARS], *previous][:CONTEXT_TURNS]
    return {"fields": fields}
