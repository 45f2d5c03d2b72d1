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
import re._constants as sre
import re._parser as sre_parse
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

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
from nodes.extract.terms import word_splitter

__all__ = [
    "MAX_ITEMS",
    "MAX_ITEM_CHARS",
    "blockers",
    "decisions",
    "may_hold_blocker",
    "may_hold_decision",
    "signals",
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
_words_of = word_splitter("'")
_QUESTION_TAIL = " \"')]*_`»”"
_TRIGGER_ENDINGS = tuple(ending + " " for ending in BLOCKER_TRIGGER_ENDINGS)


def decisions(text: str, patterns: SignalPatterns = DEFAULT_PATTERNS) -> list[str]:
    """Return the sentences of ``text`` that state a decision, finding or conclusion.

    Sentences are whitespace-collapsed, at most ``MAX_ITEM_CHARS`` long (cut with
    "…"), in text order, de-duplicated, and at most ``MAX_ITEMS`` of them.
    """
    return signals(text, patterns, blockers=False)[0]


def blockers(text: str, patterns: SignalPatterns = DEFAULT_PATTERNS) -> list[str]:
    """Return the sentences of ``text`` that report a blocker, failure or error.

    Same shape as ``decisions``: collapsed, truncated, ordered, unique, at most
    ``MAX_ITEMS``.
    """
    return signals(text, patterns, decisions=False)[1]


def signals(text: str, patterns: SignalPatterns = DEFAULT_PATTERNS, *,
            decisions: bool = True, blockers: bool = True) -> tuple[list[str], list[str]]:
    """``(decisions(text), blockers(text))`` in one pass: the turn is split into
    sentences once and each sentence's words are read once for both screens."""
    decision_extras = len(patterns.decision) > patterns.n_builtin_decisions
    blocker_extras = len(patterns.blocker) > patterns.n_builtin_blockers
    if not (decision_extras and blocker_extras):
        words = _words(text)
        decisions = decisions and (decision_extras or _may_hold_decision(text, words))
        blockers = blockers and (blocker_extras or _may_hold_blocker(text, words))
    found_decisions, found_blockers = _Found(), _Found()
    if not (decisions or blockers):
        return found_decisions.items, found_blockers.items
    for sentence in sentences(text):
        # Same length as the sentence, so match offsets stay valid; patterns then
        # only need the ASCII apostrophe.
        probe = sentence.replace("’", "'")
        question = probe.rstrip(_QUESTION_TAIL).endswith("?")
        # The screens, sentence by sentence (the words read once, for both)
        in_sentence = None if decision_extras and blocker_extras else _words(probe)
        if (decisions and not found_decisions.full and not question
                and (decision_extras or _may_hold_decision(probe, in_sentence))
                and _has_live_cue(probe, patterns.decision, patterns.decision_negation,
                                  None)):
            found_decisions.add(sentence)
        if (blockers and not found_blockers.full
                and not (question and patterns.yes_no_question.match(probe))
                and (blocker_extras or _may_hold_blocker(probe, in_sentence))
                and _has_live_cue(probe, patterns.blocker, patterns.blocker_negation,
                                  patterns.blocker_resolution)):
            found_blockers.add(sentence)
        if ((found_decisions.full or not decisions)
                and (found_blockers.full or not blockers)):
            break
    return found_decisions.items, found_blockers.items


class _Found:
    """Sentences kept for one kind of signal: truncated, unique, at most MAX_ITEMS."""

    __slots__ = ("items", "seen")

    def __init__(self) -> None:
        self.items: list[str] = []
        self.seen: set[str] = set()

    @property
    def full(self) -> bool:
        return len(self.items) >= MAX_ITEMS

    def add(self, sentence: str) -> None:
        item = _truncate(sentence)
        if item not in self.seen:
            self.seen.add(item)
            self.items.append(item)


def _words(text: str) -> set[str]:
    return set(_words_of(text.lower().replace("’", "'")))


def _ending(words: set[str]) -> bool:
    """Whether one of ``words`` ends like an exception class name: an ending followed by
    the space after its word, in the words joined (one search an ending, not a test a
    word; words hold no space)."""
    joined = " ".join(words) + " "
    return any(ending in joined for ending in _TRIGGER_ENDINGS)


def may_hold_decision(text: str) -> bool:
    """False only when no built-in decision cue can match anywhere in ``text``."""
    return _may_hold_decision(text, _words(text))


def may_hold_blocker(text: str) -> bool:
    """False only when no built-in blocker cue can match anywhere in ``text``."""
    return _may_hold_blocker(text, _words(text))


def _may_hold_decision(text: str, words: set[str] | None) -> bool:
    return not DECISION_TRIGGERS.isdisjoint(words or ()) or any(
        mark in text for mark in DECISION_TRIGGER_MARKS
    )


def _may_hold_blocker(text: str, words: set[str] | None) -> bool:
    words = words or set()
    return (
        not BLOCKER_TRIGGERS.isdisjoint(words)
        or _ending(words)
        or any(mark in text for mark in BLOCKER_TRIGGER_MARKS)
    )


def _matching_sentences(text: str, keep: Callable[[str], bool]) -> list[str]:
    found = _Found()
    for sentence in sentences(text):
        if keep(sentence.replace("’", "'")):
            found.add(sentence)
            if found.full:
                break
    return found.items


def _has_live_cue(
    probe: str,
    cues: Sequence[re.Pattern[str]],
    negation: re.Pattern[str],
    resolution: re.Pattern[str] | None,
) -> bool:
    # An ASCII sentence skips the cues whose necessary text it lacks (``_needs``),
    # each of the cues' necessary strings looked for once; case-insensitive matching
    # of other scripts is left to the regexes themselves.
    present: frozenset[str] | None = None
    if probe.isascii():
        lowered = probe.lower()
        parts, needed = _screen(cues)
        present = frozenset([part for part in parts if part in lowered])
    for n, cue in enumerate(cues):
        if present is not None:
            needs = needed[n]
            if needs is not None and needs.isdisjoint(present):
                continue
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


_SCREENS: dict[int, tuple[Sequence[re.Pattern[str]], tuple[str, ...],
                          tuple[frozenset[str] | None, ...]]] = {}


def _screen(cues: Sequence[re.Pattern[str]]
            ) -> tuple[tuple[str, ...], tuple[frozenset[str] | None, ...]]:
    """Every necessary string of ``cues`` (``_needs``), each once, and each cue's own
    (kept per list of cues: a store's patterns are compiled once)."""
    kept = _SCREENS.get(id(cues))
    if kept is None or kept[0] is not cues:
        needed = tuple(None if (n := _needs(cue)) is None else frozenset(n) for cue in cues)
        parts = tuple(dict.fromkeys(p for n in needed if n is not None for p in sorted(n)))
        if len(_SCREENS) >= 64:
            _SCREENS.clear()
        kept = _SCREENS[id(cues)] = (cues, parts, needed)
    return kept[1], kept[2]


@lru_cache(maxsize=256)
def _needs(cue: re.Pattern[str]) -> tuple[str, ...] | None:
    """Lower-case ASCII strings one of which every match of ``cue`` contains, read
    from the regex itself (its literal runs, alternations and required repeats), or
    None when none can be named. A sentence holding none of them cannot match."""
    found = _needed_in(sre_parse.parse(cue.pattern, cue.flags))
    if found is None or not all(part.isascii() for part in found):
        return None
    # A part that holds another part is implied by it.
    return tuple(sorted(p for p in found if not any(q != p and q in p for q in found)))


def _needed_in(sequence: Any) -> frozenset[str] | None:
    best: frozenset[str] | None = None

    def consider(parts: frozenset[str] | None) -> None:
        nonlocal best
        if parts and (best is None or _selectivity(parts) > _selectivity(best)):
            best = parts

    run: list[str] = []  # consecutive literal characters: a string every match holds
    for op, av in sequence:
        if op is sre.LITERAL:
            run.append(chr(av).lower())
            continue
        if run:
            consider(frozenset(["".join(run)]))
            run = []
        if op is sre.SUBPATTERN:
            consider(_needed_in(av[-1]))
        elif op is sre.BRANCH:
            branches = [_needed_in(b) for b in av[1]]
            if all(branches):
                consider(frozenset().union(*branches))  # type: ignore[arg-type]
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and av[0] >= 1:
            consider(_needed_in(av[2]))
    if run:
        consider(frozenset(["".join(run)]))
    return best


def _selectivity(parts: frozenset[str]) -> tuple[int, int]:
    return min(len(p) for p in parts), -len(parts)


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
