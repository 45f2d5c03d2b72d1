"""Node: the keyword index's search fields of a page of copied turns.

The index is rebuilt in the target's form from each turn's text, with the fields an
ingest gives it, by the ingest's own node function over the page (nodes.extract.search_fields,
as the batch path runs it: nodes.batch): the words of the two turns before it in
its session that it does not use, and its month and year. A session's turns come in
order, so each turn's neighbours are the page's turns before it, or for the page's
first turn the two that the source holds before it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.batch import each_turn
from nodes.context import RunContext, node
from nodes.extract.search_fields import CONTEXT_TURNS
from store.neighbours import NEIGHBOUR_CHARS

__all__ = ["migration_fields"]


class MigrationFieldsWrites(TypedDict):
    fields: Any


@node
def migration_fields(rows: Any, evidence: Any, *, run: RunContext) -> MigrationFieldsWrites:
    rows, evidence = rows, evidence
    session, previous = rows[0][1], list(evidence.previous_contents)
    items: list[dict[str, Any]] = []
    for row in rows:  # (id, session_id, role, created_at, content, ...): store.transfer.TABLES
        if row[1] != session:
            session, previous = row[1], []
        items.append({"turn": {"content": row[4], "created_at": row[3]},
                      "previous": previous[:CONTEXT_TURNS]})
        previous = [row[4][:NEIGHBOUR_CHARS], *previous][:CONTEXT_TURNS]
    each_turn(run, items, "search_fields")  # the ingest's own, over the page
    return {"fields": [(i["fields"]["context"], i["fields"]["dated"]) for i in items]}
