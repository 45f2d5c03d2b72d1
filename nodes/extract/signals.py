"""Decisions and blockers stated in a conversation turn, found without a model.

Both nodes split the turn into bounded sentences (``nodes.extract.sentences``) and
keep a sentence when a cue from ``nodes.extract.patterns`` is *live* in it:

* the clause before the cue (at most ``PREFIX_CHARS`` characters, cut at the last
  comma, semicolon, colon, bracket or conjunction) holds no negation or
  hypothetical ("no errors", "if the upload fails", "we haven't decided");
* for blockers, the ``SUFFIX_CHARS`` after the cue hold no resolution ("was fixed
  by", "but now pass");
* the sentence is not a question (decisions) or a yes/no question (blockers:
  "Did it fail?" asks, "Why is CI failing?" reports).

Every window is bounded, so the cost per sentence is linear in its length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from nodes.extract.patterns import (
    BLOCKER_TRIGGER_ENDINGS,
    BLOCKER_TRIGGER_MARKS,
    BLOCKER_TRIGGERS,
    DECISION_TRIGGER_MARKS,
    DECISION_TRIGGERS,
    DEFAULT_PATTERNS,
    SignalPatterns,
)
from nodes.extract.sentences import sentences

__all__ = [
    "MAX_ITEMS",
    "MAX_ITEM_CHARS",
    "blockers",
    "decisions",
    "may_hold_blocker",
    "may_hold_decision",
]

MAX_ITEMS = 8
MAX_ITEM_CHARS = 200
PREFIX_CHARS = 48
SUFFIX_CHARS = 48

_ELLIPSIS = "…"
# A negation only reaches across its own clause: in "No idea why, but the build is
# failing" the "No" belongs to another clause.
_CLAUSE_BREAK = re.compile(
    r"[,;:()\[\]]|\b(?:but|and|so|then|while|though|although|because|after)\b", re.I
)
_WORD = re.compile(r"[\w']+")
_QUESTION_TAIL = " \"')]*_`»”"


def decisions(text: str, patterns: SignalPatterns = DEFAULT_PATTERNS) -> list[str]:
    """Return the sentences of ``text`` that state a decision, finding or conclusion.

    Sentences are whitespace-collapsed, at most ``MAX_ITEM_CHARS`` long (cut with
    "…"), in text order, de-duplicated, and at most ``MAX_ITEMS`` of them.
    """

    extras = patterns.decision[patterns.n_builtin_decisions :]
    if not extras and not may_hold_decision(text):
        return []

    def is_decision(probe: str) -> bool:
        if probe.rstrip(_QUESTION_TAIL).endswith("?"):
            return False
        if not extras and not may_hold_decision(probe):  # the screen, sentence by sentence
            return False
        return _has_live_cue(probe, patterns.decision, patterns.decision_negation, None)

    return _matching_sentences(text, is_decision)


def blockers(text: str, patterns: SignalPatterns = DEFAULT_PATTERNS) -> list[str]:
    """Return the sentences of ``text`` that report a blocker, failure or error.

    Same shape as ``decisions``: collapsed, truncated, ordered, unique, at most
    ``MAX_ITEMS``.
    """

    extras = patterns.blocker[patterns.n_builtin_blockers :]
    if not extras and not may_hold_blocker(text):
        return []

    def is_blocker(probe: str) -> bool:
        if probe.rstrip(_QUESTION_TAIL).endswith("?") and patterns.yes_no_question.match(probe):
            return False
        if not extras and not may_hold_blocker(probe):  # the screen, sentence by sentence
            return False
        return _has_live_cue(
            probe, patterns.blocker, patterns.blocker_negation, patterns.blocker_resolution
        )

    return _matching_sentences(text, is_blocker)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("’", "'")))


def may_hold_decision(text: str) -> bool:
    """False only when no built-in decision cue can match anywhere in ``text``."""
    return not DECISION_TRIGGERS.isdisjoint(_words(text)) or any(
        mark in text for mark in DECISION_TRIGGER_MARKS
    )


def may_hold_blocker(text: str) -> bool:
    """False only when no built-in blocker cue can match anywhere in ``text``."""
    words = _words(text)
    return (
        not BLOCKER_TRIGGERS.isdisjoint(words)
        or any(w.endswith(BLOCKER_TRIGGER_ENDINGS) for w in words)
        or any(mark in text for mark in BLOCKER_TRIGGER_MARKS)
    )


def _matching_sentences(text: str, keep: Callable[[str], bool]) -> list[str]:
    found: list[str] = []
    seen: set[str] = set()
    for sentence in sentences(text):
        # Same length as the sentence, so match offsets stay valid; patterns then
        # only need the ASCII apostrophe.
        probe = sentence.replace("’", "'")
        if not keep(probe):
            continue
        item = _truncate(sentence)
        if item in seen:
            continue
        seen.add(item)
        found.append(item)
        if len(found) == MAX_ITEMS:
            break
    return found


def _has_live_cue(
    probe: str,
    cues: Sequence[re.Pattern[str]],
    negation: re.Pattern[str],
    resolution: re.Pattern[str] | None,
) -> bool:
    for cue in cues:
        has_cue_group = "cue" in cue.groupindex
        for match in cue.finditer(probe):
            start = match.start("cue") if has_cue_group else match.start()
            if start < 0:  # the alternative without a `cue` group matched
                start = match.start()
            if negation.search(_clause_before(probe, start)):
                continue
            if resolution is not None and resolution.search(
                probe[match.end() : match.end() + SUFFIX_CHARS]
            ):
                continue
            return True
    return False


def _clause_before(probe: str, start: int) -> str:
    """Return the part of the cue's own clause that precedes it, bounded."""
    window_start = max(0, start - PREFIX_CHARS)
    window = probe[window_start:start]
    if window_start > 0:
        # Drop the partial word at the cut so "piano" cannot yield a word "no".
        space = window.find(" ")
        window = window[space + 1 :] if space >= 0 else ""
    last_break = 0
    for brk in _CLAUSE_BREAK.finditer(window):
        last_break = brk.end()
    return window[last_break:]


def _truncate(sentence: str) -> str:
    if len(sentence) <= MAX_ITEM_CHARS:
        return sentence
    return sentence[: MAX_ITEM_CHARS - 1].rstrip() + _ELLIPSIS
