"""Relations between the entities of a turn, found without a model (GraphRAG).

* ``co_occurs`` (undirected, ends in key order): two entities named in one turn, or
  one in the turn and one in the turn before it in the session (the window). Only the
  ``PAIR_ENTITIES`` most salient entities of a turn pair up (``WINDOW_ENTITIES``
  across the window), so a giant turn adds a bounded number of edges; speakers pair
  through their typed edges and their turns, not by co-occurrence (they would join
  everything they said).
* typed, directed edges from the verbs that the decision and blocker cues use, and
  from fixes and replacements: ``decides`` ("we went with X", subject: the entity
  before the verb, else the turn's speaker), ``blocks`` ("X blocks Y", "Y is blocked
  by X"), ``fixes`` ("X fixes Y", "Y was fixed by X"), ``replaces`` ("X replaces Y",
  "replaced Y with X", "switched from Y to X", "X instead of Y"). Both ends must be
  named within ``REACH`` characters of the verb, in the same sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from nodes.extract.entities import Mention
from nodes.extract.patterns import FIX_VERBS

__all__ = ["PAIR_ENTITIES", "RELATION_KINDS", "WINDOW_ENTITIES", "co_occurring", "salient",
           "typed_relations"]

PAIR_ENTITIES = 8
WINDOW_ENTITIES = 3
REACH = 80
RELATION_KINDS = ("co_occurs", "decides", "blocks", "fixes", "replaces")
_KIND_RANK = {k: i for i, k in enumerate(("url", "file", "issue", "package", "code", "name",
                                          "phrase"))}

_VERB = re.compile(
    r"\b(?:(?P<passive_fix>(?:is|are|was|were|been|be|being|got|gets) (?:fixed|resolved"
    r"|patched) (?:by|in|with|via))"
    r"|(?P<passive_replace>(?:is|are|was|were|been|be|being|got|gets) (?:replaced"
    r"|superseded) (?:by|with))"
    r"|(?P<passive_block>(?:(?:is|are|was|were|been|being|got|gets|still) )?blocked (?:by|on))"
    r"|(?P<move>(?:switch|switched|switching|migrate|migrated|migrating|move|moved|moving"
    r"|went) from)"
    r"|(?P<decide>decided (?:on|to use|to adopt|to go with|to switch to)|chose|chosen"
    r"|opted for|went with|settled on|picked|adopted|going with|sticking with"
    r"|switched to|standardi[sz]ed on)"
    r"|(?P<fix>" + FIX_VERBS + ")"
    r"|(?P<instead>instead of|rather than|in place of)"
    r"|(?P<replace>replaces|replaced|replacing|replace|supersedes|superseded)"
    r"|(?P<block>blocks|blocking|breaks|broke))\b", re.I)
_SCREEN = ("fix", "resolv", "patch", "replac", "supersed", "block", "break", "broke",
           "decided", "chose", "chosen", "opted", "went", "settled", "picked", "adopt",
           "going with", "sticking", "switch", "migrat", "moved", "moving", "standardi",
           "instead", "rather than", "in place")
# The same verbs for an ASCII text lower-cased (same offsets): a case-sensitive scan is
# about three times faster than ``re.I`` over the text.
_VERB_LOWER = re.compile(_VERB.pattern)
_SCREENED = re.compile("|".join(map(re.escape, _SCREEN)))  # on the lower-cased text
_SENTENCE_END = re.compile(r"[.!?\n]")
# Every verb match holds a screened fragment (or "move", of "move from") that starts at
# most ``_CUE_REACH`` characters into it ("being fixed by"): the verbs of an ASCII text
# are matched only at those starts, not searched for at every character.
_CUE_REACH = 6

Occurrence = tuple[str, int, int]  # key, start, end


def salient(found: Sequence[Mention], limit: int) -> list[str]:
    """The keys that pair up: no speakers; named kinds before phrases, then text order."""
    # ``found`` is in text order (``mentions_and_occurrences``): no sort needed.
    keys = [m[0] for m in found if m[2] != "phrase" and m[2] != "speaker"]
    if len(keys) < limit:
        keys += [m[0] for m in found if m[2] == "phrase"]
    return keys[:limit]


def co_occurring(current: Sequence[str], previous: Sequence[str]
                 ) -> tuple[Sequence[str], list[tuple[str, str]]]:
    """The co-occurrences of a turn: the keys that pair with each other (every two of
    them make an undirected pair of the turn), and the undirected pairs (key order)
    across the turn and the turn before (they need the turn before as support too).
    Each pair once, as the keys of a turn are distinct."""
    mine = current[:PAIR_ENTITIES]
    # A pair of the turn's first keys with one of the turn before that the turn also
    # names is a pair of the turn already.
    return mine, [(a, b) if a < b else (b, a)
                  for a in current[:WINDOW_ENTITIES] for b in previous[:WINDOW_ENTITIES]
                  if b not in mine]


def _before(occ: Sequence[Occurrence], text: str, pos: int) -> str | None:
    floor = max(0, pos - REACH)
    for key, start, end in reversed(occ):
        if end <= pos:
            if start < floor or _SENTENCE_END.search(text, end, pos):
                return None
            return key
    return None


def _after(occ: Sequence[Occurrence], text: str, pos: int) -> tuple[str, int] | None:
    for key, start, end in occ:
        if start >= pos:
            if start > pos + REACH or _SENTENCE_END.search(text, pos, start):
                return None
            return key, end
    return None


def _found_at(text: str, fragment: str) -> Iterator[int]:
    """Every position of ``fragment`` in ``text`` (overlapping ones too)."""
    at = text.find(fragment)
    while at != -1:
        yield at
        at = text.find(fragment, at + 1)


def _verb_starts(lower: str) -> list[int]:
    """Where a verb may start in ``lower`` (sorted); none when no fragment is screened."""
    cues = [at for cue in _SCREEN for at in _found_at(lower, cue)]
    if not cues:
        return []
    cues += _found_at(lower, "move")
    return sorted({start for cue in cues for start in range(max(0, cue - _CUE_REACH), cue + 1)})


def _matches_at(pattern: re.Pattern[str], text: str, starts: list[int]
                ) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` when every match begins at one of ``starts``."""
    end = 0
    for start in starts:
        if start >= end:
            m = pattern.match(text, start)
            if m:
                end = m.end()
                yield m


def typed_relations(text: str, occ: Sequence[Occurrence], speaker: str | None
                    ) -> Iterator[tuple[str, str, str]]:
    """(source key, target key, kind) stated in ``text``; ``occ`` is every occurrence
    of an entity in text order, ``speaker`` the key of the turn's speaker."""
    if not occ:
        return
    lower = text.lower()
    verbs: Iterable[re.Match[str]]
    if text.isascii():
        starts = _verb_starts(lower)
        if not starts:
            return
        verbs = _matches_at(_VERB_LOWER, lower, starts)
    elif _SCREENED.search(lower):
        verbs = _VERB.finditer(text)
    else:
        return
    for m in verbs:
        kind_group = m.lastgroup
        before = _before(occ, text, m.start())
        after = _after(occ, text, m.end())
        src: str | None
        dst: str | None
        if kind_group in ("passive_fix", "passive_replace", "passive_block"):
            kind = kind_group.split("_")[1] + "s"
            kind = {"fixs": "fixes", "replaces": "replaces", "blocks": "blocks"}[kind]
            src, dst = (after[0] if after else None), before or speaker
        elif kind_group == "move":
            # "switched from Y to X": X replaces Y
            src, dst, kind = None, None, "replaces"
            if after:
                rest = re.match(r"[^.!?\n]{0,40}?\bto\b", text[after[1]:after[1] + 60])
                target = _after(occ, text, after[1] + rest.end()) if rest else None
                src, dst = (target[0] if target else None), after[0]
        elif kind_group == "decide":
            src, dst, kind = speaker or before, after[0] if after else None, "decides"
        elif kind_group == "instead":
            src, dst, kind = before, after[0] if after else None, "replaces"
        elif kind_group == "replace" and after:
            kind = "replaces"
            rest = re.match(r" {1,3}(?:with|by) ", text[after[1]:after[1] + 8])
            target = _after(occ, text, after[1] + rest.end()) if rest else None
            if target:  # "replaced Y with X"
                src, dst = target[0], after[0]
            else:
                src, dst = before or speaker, after[0]
        else:
            kind = {"fix": "fixes", "replace": "replaces", "block": "blocks"}[str(kind_group)]
            src, dst = before or speaker, after[0] if after else None
        if src and dst and src != dst:
            yield src, dst, kind
