"""Words of a text: tokenising and stop words, shared by keyword queries, the keyword
index's context column and the hashed vectors."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from functools import lru_cache

__all__ = ["CONTEXT_TERMS", "STOP_WORDS", "content_tokens", "content_words", "context_terms",
           "word_splitter", "words"]

# Words a turn borrows from the turns before it, at most: ~32 words cost the keyword
# index ~170 bytes per 300-character turn; recall stops improving beyond ~32.
CONTEXT_TERMS = 32
OWN_CHARS = 20_000  # a word used only beyond this in a huge turn may be borrowed again


def word_splitter(extra: str = "") -> Callable[[str], list[str]]:
    """``re.findall`` of runs of word characters (``\\w``, and ``extra``), in order. ASCII
    text (most turns) is split by one ``bytes.translate`` (every other character to a
    space) and ``str.split`` instead, at a fraction of the regex's cost: the same words."""
    pattern = re.compile(rf"[\w{re.escape(extra)}]+")
    kept = string.ascii_letters + string.digits + "_" + extra  # what \w matches in ASCII
    spaced = bytes(code if code >= 128 or chr(code) in kept else 32 for code in range(256))

    def split(text: str) -> list[str]:
        if text.isascii():
            return text.encode("ascii").translate(spaced).decode("ascii").split()
        return pattern.findall(text)

    return split


_split = word_splitter()

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
    return _split(text.lower())


def content_words(text: str) -> list[str]:
    """Words that are not stop words; all words when every one is a stop word."""
    tokens = words(text)
    kept = [w for w in tokens if w not in STOP_WORDS]
    return kept or tokens


def context_terms(text: str, previous: Sequence[str], limit: int = CONTEXT_TERMS) -> str:
    """What a turn's context column holds: distinct content words of the turns before
    it (``previous``, nearest first) that the turn itself does not use, nearest
    turn's words first, at most ``limit``.

    An answer rarely repeats its question ("How was the trip?" / "We loved it!"); with
    the question's words beside it, the answer is found by them, ranked below turns
    that use the words themselves (see ``store.search_filter.BM25_WEIGHTS``).
    """
    own = set(_tokens(text[:OWN_CHARS]))
    found: dict[str, None] = {}
    for turn in previous:
        for word in _distinct_content_words(turn):
            if word not in own:
                found[word] = None
                if len(found) >= limit:
                    return " ".join(found)
    return " ".join(found)


# A turn's words are read three times while it is ingested (its vector, its keyword
# context, then as the context of the next turn): tokenised once, for the few texts
# a batch has in hand.
@lru_cache(maxsize=256)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(words(text))


@lru_cache(maxsize=256)
def content_tokens(text: str) -> tuple[str, ...]:
    """The words of ``text`` that are not stop words, in order, repeats kept (cached
    for the few texts in hand, as ``words`` is not)."""
    return tuple([w for w in _tokens(text) if w not in STOP_WORDS])


@lru_cache(maxsize=256)
def _distinct_content_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` that are not stop words, each once, in order of first use
    (cached: a turn is read again as the context of the next two turns)."""
    return tuple(dict.fromkeys(content_tokens(text)))
