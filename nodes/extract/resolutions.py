"""Which blockers of a session are still open, found without a model.

A blocker (a sentence that ``nodes.extract.signals.blockers`` kept) stays open until a
later turn of the same session says it is fixed or resolved: a sentence with one of the
verbs of the GraphRAG ``fixes`` relation (``nodes.extract.patterns.FIX_VERBS``), live
(not negated, planned, tried or asked: "not fixed yet", "let's fix", "trying to fix",
"is it fixed?"), about the same thing. The same thing means the sentence names the
blocker's turn (``#123``), or shares an identifier with the blocker (``test_sync_pull``,
``store/db.py``, ``HTTP 413``, ``KeyError``), or shares two of its topic words (its
content words less the ones every blocker or fix report uses: "failing", "error",
"stuck", "fixed"...), or all of them when it has one or two ("The build is failing on
CI" / "The CI build is fixed").

A statement closes only the earlier blockers it is most surely about (a shared turn
reference, then shared identifiers, then shared topic words), so that "the osprey
exporter build is fixed" does not also close "the kestrel exporter build is failing".

``fix_statements`` keeps the live fix sentences of a turn; ``resolutions`` pairs each
blocker with the first later statement that closes it. Both are linear in the text; the turns
they read are screened by ``FIX_FRAGMENTS`` first (in the store, with ``LIKE``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from nodes.context import node
from nodes.extract.patterns import FIX_VERBS
from nodes.extract.sentences import sentences
from nodes.extract.terms import STOP_WORDS

__all__ = ["FIX_FRAGMENTS", "FixStatement", "blocker_status", "fix_statements", "resolutions",
           "topic"]

# Every fix verb holds one of these (lower case): the screen for candidate turns.
FIX_FRAGMENTS = ("fix", "resolve", "patch")
MAX_STATEMENTS = 16  # fix sentences kept per turn
_CUE = re.compile(rf"\b(?:{FIX_VERBS})\b", re.I)
_BEFORE_CHARS = 48
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]]|\b(?:but|and|so|then|while|though|although)\b", re.I)
# In the clause before the verb: a negation, a plan, an attempt or a condition.
_NOT_DONE = re.compile(
    r"\b(?:not|never|no|nothing|cannot|unable|yet|still|try|tries|trying|tried|attempt"
    r"|attempts|attempting|attempted|how|whether|if|unless|once|until|should|would|could"
    r"|might|may|must|need|needs|want|wants|will|going|gonna|let's|let|plan|planning"
    r"|hope|hopefully|before|can)\b|n't\b|'ll\b|\bto\s*\Z", re.I)
_NOT_YET_AFTER = re.compile(r"\A\W{0,3}(?:\w+\W+){0,3}?(?:yet|later|soon|next)\b", re.I)
_QUESTION_TAIL = " \"')]*_`»”"
_WORD = re.compile(r"[\w']+")
_TOKEN = re.compile(r"[^\s,;:!?()\[\]{}\"'`<>]+")
_IDENTIFIER = re.compile(r"[A-Za-z]\w*[_./]\w|\w*\d\w*|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*")
_REFERENCE = re.compile(r"#(\d{1,18})\b")

# Words of nearly every blocker report or fix statement: they say nothing about which
# problem it is.
_GENERIC = STOP_WORDS | frozenset(
    """
    blocked blocker blockers blocking block blocks stuck fail fails failing failed failure
    failures error errors broken broke breaks break crash crashes crashed crashing hang
    hangs hung hanging timeout timeouts timed times timing out cannot can't couldn't
    unable won't doesn't didn't isn't aren't wasn't work works working worked issue issues
    problem problems bug bugs still again now finally fix fixes fixed fixing resolve
    resolves resolved resolving patch patches patched seems seem keep keeps kept
    """.split())


@dataclass(frozen=True)
class FixStatement:
    turn_id: int
    text: str
    words: frozenset[str]  # topic words
    identifiers: frozenset[str]
    references: frozenset[int]  # turn ids it names as #id


def _norm(word: str) -> str:
    word = word.lower().strip("'")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


def topic(text: str) -> frozenset[str]:
    """The words of a sentence that say what it is about (normalised, generic ones
    dropped)."""
    return frozenset(w for w in (_norm(t) for t in _WORD.findall(text))
                     if w and w not in _GENERIC and not w.isdigit())


def _identifiers(text: str) -> frozenset[str]:
    found = set()
    for token in _TOKEN.findall(text):
        token = token.strip(".-")
        if len(token) >= 3 and _IDENTIFIER.search(token):
            found.add(token.lower())
    return frozenset(found)


def _live(sentence: str, cue: re.Match[str]) -> bool:
    window_start = max(0, cue.start() - _BEFORE_CHARS)
    before = sentence[window_start:cue.start()]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    if breaks:
        before = before[breaks[-1].end():]
    if _NOT_DONE.search(before):
        return False
    return not _NOT_YET_AFTER.match(sentence[cue.end():cue.end() + 40])


def fix_statements(turn_id: int, text: str) -> list[FixStatement]:
    """The sentences of a turn that say something is fixed or resolved, at most
    ``MAX_STATEMENTS``."""
    if not _CUE.search(text):
        return []
    found: list[FixStatement] = []
    for sentence in sentences(text):
        if sentence.rstrip(_QUESTION_TAIL).endswith("?"):
            continue
        if not any(_live(sentence, m) for m in _CUE.finditer(sentence)):
            continue
        found.append(FixStatement(
            turn_id, sentence, topic(sentence), _identifiers(sentence),
            frozenset(int(m.group(1)) for m in _REFERENCE.finditer(sentence))))
        if len(found) == MAX_STATEMENTS:
            break
    return found


def _score(blocker_id: int, words: frozenset[str], identifiers: frozenset[str],
           fix: FixStatement) -> float:
    """How surely a fix statement is about a blocker: 0 when it is not."""
    if blocker_id in fix.references:
        return math.inf
    shared_ids = identifiers & fix.identifiers
    shared = words & fix.words
    if shared_ids or len(shared) >= 2 or (0 < len(words) <= 2 and shared == words):
        return 10.0 * len(shared_ids) + len(shared)
    return 0.0


def resolutions(blockers: Sequence[tuple[int, str]], fixes: Sequence[FixStatement]
                ) -> list[FixStatement | None]:
    """For each (turn id, sentence) blocker, the first statement of a later turn that
    says it is fixed, or None (still open). ``fixes`` are in turn order.

    A statement closes the blocker(s) stated before it that it is most surely about
    (the same problem stated twice ties): "the osprey exporter build is fixed" closes
    "the osprey exporter build is failing", not "the kestrel exporter build is
    failing", with which it shares two words too."""
    topics = [(topic(text), _identifiers(text)) for _, text in blockers]
    out: list[FixStatement | None] = [None] * len(blockers)
    for fix in fixes:
        scores = [_score(int(b), w, i, fix) if int(b) < fix.turn_id else 0.0
                  for (b, _), (w, i) in zip(blockers, topics, strict=True)]
        best = max(scores, default=0.0)
        if best <= 0.0:
            continue
        for k, score in enumerate(scores):
            if score == best and out[k] is None:
                out[k] = fix
    return out


class BlockerStatusWrites(TypedDict):
    sessions: Any


@node
def blocker_status(sessions: Any) -> BlockerStatusWrites:
    """Node: split each briefed session's blockers into open and resolved ones."""
    out = []
    for s in sessions or []:
        fixes = [f for turn_id, text in s["fixes"] for f in fix_statements(turn_id, text)]
        found = resolutions([(int(i), text) for i, text in s["blockers"]], fixes)
        open_, resolved = [], []
        for (blocker_id, text), fix in zip(s["blockers"], found, strict=True):
            if fix is None:
                open_.append([blocker_id, text])
            else:
                resolved.append([blocker_id, text, fix.turn_id])
        out.append({**{k: v for k, v in s.items() if k not in ("blockers", "fixes")},
                    "open_blockers": open_, "resolved_blockers": resolved})
    return {"sessions": out}
