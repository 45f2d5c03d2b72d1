"""Split a conversation turn into short, bounded sentences.

Extraction regexes run once per sentence, so the splitter is what keeps extraction
linear: every step here is a single forward pass, and no piece it yields is longer
than ``MAX_SENTENCE_CHARS``, however the input is shaped (one huge line, no
punctuation, thousands of bullets).

Rules, in order:

1. Lines are split on any line break (``str.splitlines``); a line never continues a
   sentence, because agent turns put one thought per line (bullets, log lines).
2. A leading bullet or list marker (``-``, ``*``, ``•``, ``1.``, ``2)``, ``[x]``) is
   dropped so it cannot be mistaken for a sentence end.
3. Within a line, a run of ``.``, ``!`` or ``?`` ends a sentence when whitespace (or
   the end of the line) follows, except after a few common abbreviations and when a
   full stop is followed by a lowercase word (``e.g. the parser``, ``v1. then``).
4. A piece longer than ``MAX_SENTENCE_CHARS`` is cut at the last space inside its
   final half window, or hard-cut when there is none.

Yielded sentences are whitespace-collapsed and never empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["MAX_SENTENCE_CHARS", "sentences"]

MAX_SENTENCE_CHARS = 1000

# Bounded repeats only: the marker is matched at the start of each line, once.
_BULLET = re.compile(r"\s{0,16}(?:(?:[-*+•‣◦▪>]|\d{1,3}[.)]|\[[ xX]?\])\s{1,8}){1,3}")
# A plain character class with a greedy `+` and nothing after it cannot backtrack,
# so finditer over a line of a million dots stays linear.
_TERMINATOR = re.compile(r"[.!?]+")
_ABBREVIATION = re.compile(r"(?:\be\.g|\bi\.e|\bvs|\bcf|\bapprox|\bfig)\Z", re.I)
_ABBREVIATION_LOOKBACK = 8


def sentences(text: str, max_chars: int = MAX_SENTENCE_CHARS) -> Iterator[str]:
    """Yield the whitespace-collapsed sentences of ``text`` in order.

    Each is non-empty and at most ``max_chars`` characters long.
    """
    if max_chars < 2:
        raise ValueError(f"max_chars must be at least 2, got {max_chars}")
    for line in text.splitlines():
        if not line or line.isspace():
            continue
        bullet = _BULLET.match(line)
        start = bullet.end() if bullet else 0
        for end in _sentence_ends(line, start):
            yield from _bounded(line[start:end], max_chars)
            start = end
        yield from _bounded(line[start:], max_chars)


def _sentence_ends(line: str, start: int) -> Iterator[int]:
    """Yield the offsets just past each sentence terminator in ``line``."""
    length = len(line)
    for match in _TERMINATOR.finditer(line, start):
        end = match.end()
        if end < length and not line[end].isspace():
            continue  # `decisions.md`, `3.5`, `?!x`: not a sentence end
        if match.group() == ".":
            before = line[max(start, match.start() - _ABBREVIATION_LOOKBACK) : match.start()]
            if _ABBREVIATION.search(before):
                continue
            if _next_word_is_lowercase(line, end):
                continue
        yield end


def _next_word_is_lowercase(line: str, pos: int) -> bool:
    # Only a short whitespace gap is examined so a line of spaces costs no more than
    # one look per terminator.
    stop = min(len(line), pos + 8)
    while pos < stop and line[pos].isspace():
        pos += 1
    return pos < stop and line[pos].islower()


def _bounded(piece: str, max_chars: int) -> Iterator[str]:
    """Yield ``piece`` collapsed, in chunks of at most ``max_chars`` characters."""
    start = 0
    length = len(piece)
    while length - start > max_chars:
        # Prefer a word boundary in the second half of the window so chunks stay
        # at least half full and the loop is linear overall.
        cut = piece.rfind(" ", start + max_chars // 2, start + max_chars)
        if cut <= start:
            cut = start + max_chars
        chunk = " ".join(piece[start:cut].split())
        if chunk:
            yield chunk
        start = cut
    chunk = " ".join(piece[start:].split())
    if chunk:
        yield chunk
