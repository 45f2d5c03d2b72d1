"""Node: what the keyword index holds for a turn besides its own words.

``context``: content words of the two turns before it in its session that it does not
use itself (an answer is found by the words of its question); ``dated``: its month
and year. Both are ranked below the turn's own words
(``store.search_filter.BM25_WEIGHTS``).
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.terms import context_terms
from store.search_filter import dated_terms

__all__ = ["CONTEXT_TURNS", "search_fields"]

CONTEXT_TURNS = 2  # one turn back holds most questions; two adds the topic being discussed


class SearchFieldsWrites(TypedDict):
    fields: Any


@node
def search_fields(turn: Any, previous: Any) -> SearchFieldsWrites:
    previous = (previous or [])[:CONTEXT_TURNS]
    return {"fields": {"context": context_terms(turn["content"], previous),
                       "dated": dated_terms(turn["created_at"])}}
