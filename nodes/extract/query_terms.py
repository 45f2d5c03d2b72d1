"""Node: the FTS5 expressions of a search query.

A query written with FTS5 operators (quotes, ``*``, OR/AND/NOT, NEAR, parentheses) is
tried as written, against the turns' own words; plain language becomes its content
words OR-ed, so a question finds the turns that share its rare words (BM25 ranks them,
in the turn, its neighbours' context and its date) instead of requiring all of them.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from nodes.context import Cfg, node
from nodes.extract.terms import content_words
from store.keyword_syntax import fts_phrase

__all__ = ["keyword_query", "term_expression", "uses_fts_syntax"]

_OPERATORS = re.compile(r'["*()^]|\bNEAR\b|\b(?:AND|OR|NOT)\b')
MAX_TERMS = 32


def uses_fts_syntax(text: str) -> bool:
    return _OPERATORS.search(text) is not None


def term_expression(text: str) -> str | None:
    """Distinct content words, each quoted, OR-ed; None when the text has no words."""
    terms = list(dict.fromkeys(content_words(text)))[:MAX_TERMS]
    return " OR ".join(fts_phrase(t) for t in terms) if terms else None


class KeywordQueryWrites(TypedDict):
    fts: Any


@node
def keyword_query(query: Any, *, cfg: Cfg) -> KeywordQueryWrites:
    """``fts``: the expression to match, whether the caller wrote it (then it is checked
    alone and matched against the turns' own words), and the word search to fall back
    to when it is not valid FTS5. With ``words_only`` (a query made from the record, not
    typed by a caller) its quotes and parentheses are never read as FTS5 syntax."""
    text = query["text"]
    if text is None:
        return {"fts": None}
    words = term_expression(text)
    if uses_fts_syntax(text) and not cfg.get("words_only"):
        return {"fts": {"expression": text, "caller": True, "fallback": words}}
    return {"fts": {"expression": words, "caller": False, "fallback": None}}
