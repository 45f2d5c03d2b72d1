"""Queries written in FTS5 syntax, as FTS5 matches and counts them in a row's words.

A caller's expression (prefixes ``migrat*``, NEAR groups, phrases, AND and OR) is
matched by FTS5 against the turn's own words only (``{body} : (...)``,
``store.sqlite.search.match_expression``), and ranked by bm25(), which counts each
phrase's instances in the row and weighs the phrase by the rows it matches alone.
This module reads an expression into the phrases FTS5 numbers and the tree it
evaluates (``parse``; the search graph's own queries, OR-ed quoted phrases:
``plain_phrases``), and says for a row's body words whether it matches and how many
instances of each phrase bm25() counts (``Expression.counts``), following SQLite's
``ext/fts5/fts5_expr.c``:

* a phrase's instances are the positions where its tokens follow one another (the last
  token, with ``*``, any token that begins with it);
* a NEAR group matches when one instance of each phrase lies within the distance, and
  keeps, of each phrase's instances, those its matching pass (``fts5ExprNearIsMatch``)
  writes out: ``_near_trimmed`` is that pass, step for step;
* bm25() reads each phrase's list as its node holds it at the row: a node below an AND
  that does not match the row is cleared (``fts5ExprNodeZeroPoslist``), a phrase that
  does not match holds none.

What this module does not read exactly is left to FTS5 (``parse`` returns None): NOT,
column filters, ``^``, a ``*`` that is not on a phrase's last token, a phrase without
words, a NEAR group under an OR (a group that fails the row there keeps the lists of a
previous row in FTS5), phrases of one NEAR group that share a token, and any token that
the ``dated`` column can hold (a month or a year: the derived index keeps the body and
the date words in one field, so it counts such a token in either).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["MAX_EXPANSIONS", "Expression", "Node", "Phrase", "fts_phrase", "parse",
           "plain_phrases"]

# The tokens of a phrase's text: (text, whether it ends in ``*``) -> its words.
Tokenize = Callable[[str, bool], list[str]]

# Above this many tokens a prefix stands for, FTS5 answers (the candidates' query would
# hold a term for each).
MAX_EXPANSIONS = 256


@dataclass(frozen=True)
class Phrase:
    """A phrase's tokens; ``prefix``: its last token matches any token it begins."""

    tokens: tuple[str, ...]
    prefix: bool

    def positions(self, words: Sequence[str]) -> list[int]:
        """Where the phrase starts in ``words`` (one column's tokens), in order."""
        tokens, prefix = self.tokens, self.prefix
        head = tokens[0]
        last = len(tokens) - 1
        if last == 0 and prefix:
            return [i for i, w in enumerate(words) if w.startswith(head)]
        starts = [i for i, w in enumerate(words) if w == head]
        if last == 0 or not starts:
            return starts
        end = tokens[last]
        n = len(words)
        return [i for i in starts if i + last < n
                and all(words[i + j] == tokens[j] for j in range(1, last))
                and (words[i + last] == end
                     or (prefix and words[i + last].startswith(end)))]

    def count(self, spaced: str) -> int:
        """How many times the phrase occurs in a column's words (``spaced``: joined and
        ended by spaces); counted in the string when that is exact."""
        head = self.tokens[0]
        if len(self.tokens) == 1:
            if self.prefix:  # every token that begins with it follows a space
                return spaced.count(f" {head}")
            word = f" {head} "
            n = spaced.count(word)
            if not n or f"{word}{head} " not in spaced:
                return n  # (one next to itself shares a space: counted once above)
        elif f" {head} " not in spaced:
            return 0
        return len(self.positions(spaced.split()))


@dataclass(frozen=True)
class Node:
    """``kind``: "and", "or", "phrase" (``phrases``: its one index) or "near"
    (``phrases``: its phrases' indexes, ``distance``)."""

    kind: str
    children: tuple[Node, ...] = ()
    phrases: tuple[int, ...] = ()
    distance: int = 0


def _near_trimmed(lists: list[list[int]], widths: Sequence[int], distance: int
                  ) -> list[list[int]]:
    """FTS5's NEAR test of one row (``fts5ExprNearIsMatch``): each phrase's positions
    (``lists``, ascending, none empty) reduced to those its pass writes out; all empty
    when the group does not match."""
    n = len(lists)
    at = [0] * n  # each phrase's current index in its list
    out: list[list[int]] = [[] for _ in range(n)]
    while True:
        top = lists[0][at[0]]
        while True:  # advance until one instance of each lies in the window
            matched = True
            for i in range(n):
                low = top - widths[i] - distance
                pos = lists[i][at[i]]
                if pos < low or pos > top:
                    matched = False
                    while pos < low:
                        at[i] += 1
                        if at[i] == len(lists[i]):
                            return out
                        pos = lists[i][at[i]]
                    if pos > top:
                        top = pos
            if matched:
                break
        for i in range(n):
            pos = lists[i][at[i]]
            if not out[i] or out[i][-1] != pos:
                out[i].append(pos)
        # advance the phrase whose next position comes first (the first such phrase)
        advance, lowest = -1, None
        for i in range(n):
            if at[i] + 1 < len(lists[i]):
                nxt = lists[i][at[i] + 1]
                if lowest is None or nxt < lowest:
                    advance, lowest = i, nxt
        if advance < 0:
            return out
        at[advance] += 1


@dataclass(frozen=True)
class Expression:
    """An expression's phrases in FTS5's order and the tree that combines them."""

    phrases: tuple[Phrase, ...]
    root: Node

    def counts(self, spaced: str) -> list[int] | None:
        """The instances of each phrase that bm25() counts in a row whose body's words
        are ``spaced`` (joined and ended by spaces), or None when the expression does not
        match the row."""
        flat = self._flat
        if flat:  # phrases at the root: each counted as it is
            counts = [p.count(spaced) for p in self.phrases]
            if (all(counts) if flat == "and" else any(counts)):
                return counts
            return None
        counts = [0] * len(self.phrases)
        if not self._visit(self.root, spaced, [], counts, root=True):
            return None
        return counts

    @functools.cached_property
    def _flat(self) -> str:
        """The root's kind when it holds phrases only ("and", "or", "phrase"), else ""."""
        if self.root.kind == "near" or any(c.kind != "phrase" for c in self.root.children):
            return ""
        return self.root.kind

    def _visit(self, node: Node, spaced: str, words: list[str], counts: list[int], *,
               root: bool = False) -> bool:
        """Whether ``node`` matches; the counts of the phrases it keeps are set
        (``words``: the body's tokens once split, else empty)."""
        if node.kind == "phrase":
            i = node.phrases[0]
            counts[i] = self.phrases[i].count(spaced)
            return counts[i] > 0
        if node.kind == "near":
            if not words:
                words += spaced.split()
            lists = [self.phrases[i].positions(words) for i in node.phrases]
            if not all(lists):
                return False
            trimmed = _near_trimmed(lists, [len(self.phrases[i].tokens) for i in node.phrases],
                                    node.distance)
            for i, kept in zip(node.phrases, trimmed, strict=True):
                counts[i] = len(kept)
            return bool(trimmed[0])
        matched = [self._visit(c, spaced, words, counts) for c in node.children]
        if node.kind == "or":
            return any(matched)
        if all(matched):
            return True
        if not root:  # an AND that fails the row clears its phrases' lists
            for i in _phrases_of(node):
                counts[i] = 0
        return False


def _phrases_of(node: Node) -> list[int]:
    if node.kind in ("phrase", "near"):
        return list(node.phrases)
    return [i for c in node.children for i in _phrases_of(c)]


class _Unsupported(Exception):
    """The expression holds what FTS5 must answer."""


def parse(expression: str, tokenize: Tokenize, dated: Callable[[str, bool], bool]
          ) -> Expression | None:
    """``expression`` (valid FTS5 syntax) read as FTS5 reads it, or None when FTS5 must
    answer it (see the module's docstring). ``tokenize``: FTS5's tokenizer for a query's
    text; ``dated(token, prefix)``: whether the ``dated`` column can hold the token (or a
    token it begins, with ``prefix``)."""
    from apsw import fts5query

    try:
        tree = fts5query.parse_query_string(expression)
    except Exception:  # valid for FTS5 (checked first) but not read here: FTS5 answers
        return None
    phrases: list[Phrase] = []
    try:
        root = _read(tree, phrases, tokenize, dated, parent=None)
    except _Unsupported:
        return None
    return Expression(tuple(phrases), root)


def _read(node: object, phrases: list[Phrase], tokenize: Tokenize,
          dated: Callable[[str, bool], bool], parent: str | None) -> Node:
    from apsw import fts5query as q

    if isinstance(node, q.PHRASE):
        phrases.append(_phrase(node, tokenize, dated))
        return Node("phrase", phrases=(len(phrases) - 1,))
    if isinstance(node, q.NEAR):
        first = len(phrases)
        for p in node.phrases:
            phrases.append(_phrase(p, tokenize, dated))
        indexes = tuple(range(first, len(phrases)))
        if len(indexes) == 1:  # a group of one phrase is the phrase
            return Node("phrase", phrases=indexes)
        if parent == "or":
            raise _Unsupported
        group = phrases[first:]
        for a in range(len(group)):
            for b in range(a + 1, len(group)):
                if _overlap(group[a], group[b]):
                    raise _Unsupported
        return Node("near", phrases=indexes, distance=int(node.distance))
    if isinstance(node, q.AND | q.OR):
        kind = "and" if isinstance(node, q.AND) else "or"
        children: list[Node] = []
        for c in node.queries:
            child = _read(c, phrases, tokenize, dated, kind)
            # FTS5 merges a child of the same kind into its parent
            children.extend(child.children if child.kind == kind else (child,))
        return Node(kind, children=tuple(children))
    raise _Unsupported  # NOT, a column filter


def _phrase(node: object, tokenize: Tokenize, dated: Callable[[str, bool], bool]) -> Phrase:
    from apsw import fts5query as q

    tokens: list[str] = []
    prefix = False
    part: object | None = node
    while part is not None:
        assert isinstance(part, q.PHRASE)
        if part.initial or not isinstance(part.phrase, str):
            raise _Unsupported
        if prefix:  # a ``*`` before the phrase's last token
            raise _Unsupported
        words = tokenize(part.phrase, part.prefix)
        if not words:
            raise _Unsupported
        tokens += words
        prefix = part.prefix
        part = part.plus
    for i, token in enumerate(tokens):
        if dated(token, prefix and i == len(tokens) - 1):
            raise _Unsupported
    return Phrase(tuple(tokens), prefix)


def _overlap(a: Phrase, b: Phrase) -> bool:
    """Whether an instance of ``a`` and one of ``b`` can share a position (a token
    that both can be)."""
    def can_be(p: Phrase, i: int, token: str, token_prefix: bool) -> bool:
        mine = p.tokens[i]
        mine_prefix = p.prefix and i == len(p.tokens) - 1
        if mine_prefix and token_prefix:
            return mine.startswith(token) or token.startswith(mine)
        if mine_prefix:
            return token.startswith(mine)
        if token_prefix:
            return mine.startswith(token)
        return mine == token

    return any(can_be(a, i, t, b.prefix and j == len(b.tokens) - 1)
               for i in range(len(a.tokens)) for j, t in enumerate(b.tokens))


def fts_phrase(text: str) -> str:
    """Quote any text as one FTS5 string (the one quoting helper for FTS queries;
    ``plain_phrases`` reads an OR of them back)."""
    return '"' + text.replace('"', '""') + '"'


def plain_phrases(expression: str) -> list[str] | None:
    """The phrases of an expression made of quoted phrases OR-ed (what the search
    graph makes of plain language, ``nodes.extract.query_terms.term_expression``), or
    None for any other FTS5 expression."""
    phrases: list[str] = []
    pos, n = 0, len(expression)
    while True:
        if pos >= n or expression[pos] != '"':
            return None
        end = pos + 1
        text: list[str] = []
        while True:
            quote = expression.find('"', end)
            if quote < 0:
                return None
            text.append(expression[end:quote])
            if expression.startswith('""', quote):
                text.append('"')
                end = quote + 2
                continue
            end = quote + 1
            break
        phrases.append("".join(text))
        if end == n:
            return phrases
        if not expression.startswith(" OR ", end):
            return None
        pos = end + 4
