"""Words of a text: tokenising and stop words, shared by keyword queries and vectors."""

from __future__ import annotations

import re

__all__ = ["STOP_WORDS", "content_words", "words"]

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words and question scaffolding ("what did we ...") that carry no topic.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can could couldn did didn do does doesn doing don down
    during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same
    shan she should shouldn so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was wasn we were weren what when
    where which while who whom why will with won would wouldn you your yours yourself
    yourselves s t ll re ve d m o y also ever get got go goes going gone like
    """.split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Words that are not stop words; all words when every one is a stop word."""
    tokens = words(text)
    kept = [w for w in tokens if w not in STOP_WORDS]
    return kept or tokens
