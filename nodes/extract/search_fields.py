"""Nodes: what the keyword index holds for a turn besides its own words.

``context``: content words of the two turns before it in its session that it does not
use itself (an answer is found by the words of its question); ``dated``: its month
and year. Both are ranked below the turn's own words
(``store.search_filter.BM25_WEIGHTS``). ``search_fields`` writes them for an ingest;
``keyword_columns`` writes a stored turn's entry in the derived keyword index, those
fields and its own words as FTS5 tokenizes them (a rebuild's worker process computes it,
nodes.publish.keyword_index).
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.terms import context_terms
from store.keyword_index import document_fields
from store.search_filter import dated_terms

__all__ = ["CONTEXT_TURNS", "keyword_columns", "search_fields"]

CONTEXT_TURNS = 2  # one turn back holds most questions; two adds the topic being discussed


class SearchFieldsWrites(TypedDict):
    fields: Any


@node
def search_fields(turn: Any, previous: Any) -> SearchFieldsWrites:
    return {"fields": _fields(turn, previous)}


class KeywordColumnsWrites(TypedDict):
    columns: Any


@node
def keyword_columns(turn: Any, previous: Any) -> KeywordColumnsWrites:
    """``store.keyword_index.document_fields`` of the turn and ``search_fields``'."""
    fields = _fields(turn, previous)
    return {"columns": document_fields(turn["content"], fields["context"], fields["dated"])}


def _fields(turn: Any, previous: Any) -> dict[str, str]:
    previous = (previous or [])[:CONTEXT_TURNS]
    return {"context": context_terms(turn["content"], previous),
            "dated": dated_terms(turn["created_at"])}
