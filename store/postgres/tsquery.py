"""FTS5 MATCH expressions as PostgreSQL tsqueries (the keyword search on PostgreSQL).

Queries reach the store in FTS5 syntax (``store.search``): quoted words OR-ed for a
question, or what the caller wrote. This module parses that syntax as SQLite's FTS5
does, so that an expression FTS5 rejects is rejected here too (``FtsSyntaxError``, and
the search falls back to the words), and writes it as the text of a tsquery for
``to_tsquery('english', ...)``, which is passed as a parameter. User text only ever
appears inside quoted tsquery operands, escaped; ``to_tsquery`` then splits and stems
it with the same parser and dictionary as the indexed turns.

What maps how (columns are the weights of ``exchanges_fts.doc``: body A, dated B,
context C; the session scope is a column of the table, not of the document):

* phrases (``"a b"``, ``a + b``) -> ``<->``; ``x*`` -> ``x:*``; AND, implicit AND, OR,
  NOT -> ``&``, ``|``, ``& !``; a phrase with no word in it matches nothing, as in FTS5;
* column filters (``body:``, ``{body context}:``, ``-dated:``) -> weight restrictions
  (``'x':A``); ``scope:`` names no words here and matches nothing;
* ``NEAR(a b, N)`` -> either order within N tokens (``a <1> b | ... | b <N+1> a``),
  pairwise for more phrases; when that would take more than MAX_NEAR_ALTERNATIVES
  alternatives, all of the phrases anywhere (said in a note);
* ``^x`` (first token of the column) has no tsquery form: matched anywhere, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import combinations

from store.search_filter import FtsSyntaxError

__all__ = ["ALL_WEIGHTS", "COLUMN_WEIGHTS", "Shape", "Tsquery", "translate"]

COLUMN_WEIGHTS = {"body": "A", "dated": "B", "context": "C", "scope": ""}
ALL_WEIGHTS = frozenset("ABC")
MAX_NESTING = 97  # FTS5's parser stack overflows beyond 97 nested parentheses
MAX_DEPTH = 256  # FTS5: "expression tree is too large (maximum depth 256)"
MAX_NEAR_ALTERNATIVES = 64

_SPACE = " \t\n\r"
_PUNCT = {"(": "LP", ")": "RP", "{": "LCP", "}": "RCP", ":": "COLON", ",": "COMMA",
          "+": "PLUS", "*": "STAR", "-": "MINUS", "^": "CARET"}
_KEYWORDS = ("AND", "OR", "NOT")
_HAS_TOKEN = re.compile(r"[^\W_]")  # unicode61 tokens: letters and digits
_LAST_WORD = re.compile(r"^(.*?)([^\W_]+)([\W_]*)$", re.DOTALL)


def _is_bareword(ch: str) -> bool:
    return ch >= "\x80" or (ch.isascii() and (ch.isalnum() or ch in "_\x1a"))


@dataclass(frozen=True)
class _Token:
    kind: str  # STRING, AND, OR, NOT, EOF, or one of _PUNCT's values
    text: str = ""  # a STRING's text (dequoted), a punctuation's character
    quoted: bool = False


def _tokens(expression: str) -> list[_Token]:
    """FTS5's tokens; text after a NUL is ignored (FTS5 reads a C string)."""
    text = expression.split("\0", 1)[0]
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            i += 1
        elif ch in _PUNCT:
            out.append(_Token(_PUNCT[ch], ch))
            i += 1
        elif ch == '"':
            j, parts = i + 1, []
            while True:
                end = text.find('"', j)
                if end < 0:
                    raise FtsSyntaxError("unterminated string")
                parts.append(text[j:end])
                if text.startswith('"', end + 1):
                    parts.append('"')
                    j = end + 2
                    continue
                i = end + 1
                break
            out.append(_Token("STRING", "".join(parts), quoted=True))
        elif _is_bareword(ch):
            j = i
            while j < n and _is_bareword(text[j]):
                j += 1
            word = text[i:j]
            out.append(_Token(word if word in _KEYWORDS else "STRING", word))
            i = j
        else:
            raise FtsSyntaxError(f'fts5: syntax error near "{ch}"')
    out.append(_Token("EOF"))
    return out


# The expression tree. Weights: the columns a phrase may match in (a subset of ABC).

@dataclass(frozen=True)
class _Phrase:
    segments: tuple[tuple[str, bool], ...]  # (STRING text, prefix), joined by +
    weights: frozenset[str]


@dataclass(frozen=True)
class _Near:
    phrases: tuple[_Phrase, ...]
    distance: int


@dataclass(frozen=True)
class _Op:
    op: str  # "&", "|" or "!" (left and not right: two children)
    children: tuple[_Node, ...]


_Node = _Phrase | _Near | _Op | None  # None: matches nothing


@dataclass
class _Parser:
    tokens: list[_Token]
    notes: list[str] = field(default_factory=list)
    pos: int = 0
    nesting: int = 0

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self, kind: str) -> _Token:
        token = self.peek()
        if token.kind != kind:
            raise FtsSyntaxError(f'fts5: syntax error near "{token.text}"')
        self.pos += 1
        return token

    def binary(self, level: int, weights: frozenset[str]) -> _Node:
        """OR (level 0) over AND (1) over NOT (2) over primaries; all left-associative."""
        if level == 3:
            return self.primary(weights)
        op = ("OR", "AND", "NOT")[level]
        node = self.binary(level + 1, weights)
        while self.peek().kind == op:
            self.pos += 1
            right = self.binary(level + 1, weights)
            node = _combine("|&!"[level], node, right)
        return node

    def primary(self, weights: frozenset[str]) -> _Node:
        token = self.peek()
        if token.kind == "LP":
            return self.group(weights)
        if self.colset_ahead():
            columns = self.colset()
            self.take("COLON")
            if self.peek().kind == "LP":
                return self.group(weights & columns)
            node = self.nearset(weights & columns)
        else:
            node = self.nearset(weights)
        while self.peek().kind in ("STRING", "CARET", "MINUS", "LCP"):  # implicit AND
            if self.colset_ahead():
                columns = self.colset()
                self.take("COLON")
                right = self.nearset(weights & columns)
            else:
                right = self.nearset(weights)
            node = _combine("&", node, right)
        return node

    def group(self, weights: frozenset[str]) -> _Node:
        self.take("LP")
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise FtsSyntaxError("fts5: parser stack overflow")
        node = self.binary(0, weights)
        self.take("RP")
        self.nesting -= 1
        return node

    def colset_ahead(self) -> bool:
        kind = self.peek().kind
        return kind in ("MINUS", "LCP") or (kind == "STRING" and self.peek(1).kind == "COLON")

    def colset(self) -> frozenset[str]:
        negate = self.peek().kind == "MINUS"
        if negate:
            self.pos += 1
        names = []
        if self.peek().kind == "LCP":
            self.pos += 1
            names.append(self.take("STRING").text)
            while self.peek().kind == "STRING":
                names.append(self.take("STRING").text)
            self.take("RCP")
        else:
            names.append(self.take("STRING").text)
        chosen: set[str] = set()
        for name in names:
            weight = COLUMN_WEIGHTS.get(name.lower())
            if weight is None:
                raise FtsSyntaxError(f"no such column: {name}")
            chosen.update(weight)
        return ALL_WEIGHTS - chosen if negate else frozenset(chosen)

    def nearset(self, weights: frozenset[str]) -> _Node:
        token = self.peek()
        if token.kind == "CARET":
            self.pos += 1
            self.note("^ (the first word of the turn) is matched anywhere in the turn on "
                      "PostgreSQL")
            return self.phrase(weights)
        if token.kind == "STRING" and self.peek(1).kind == "LP":
            if token.quoted or token.text != "NEAR":
                raise FtsSyntaxError(f'fts5: syntax error near "{token.text}"')
            self.pos += 2
            phrases = [self.phrase(weights)]
            while self.peek().kind == "STRING":
                phrases.append(self.phrase(weights))
            distance = 10
            if self.peek().kind == "COMMA":
                self.pos += 1
                raw = self.take("STRING")
                if raw.quoted or not raw.text.isascii() or not raw.text.isdigit():
                    raise FtsSyntaxError(f'expected integer, got "{raw.text}"')
                distance = int(raw.text)
            self.take("RP")
            return self.near(phrases, distance)
        return self.phrase(weights)

    def phrase(self, weights: frozenset[str]) -> _Node:
        segments = [self.segment()]
        while self.peek().kind == "PLUS":
            self.pos += 1
            segments.append(self.segment())
        if not weights or not any(_HAS_TOKEN.search(text) for text, _ in segments):
            return None
        return _Phrase(tuple(segments), weights)

    def segment(self) -> tuple[str, bool]:
        text = self.take("STRING").text
        prefix = self.peek().kind == "STAR"
        if prefix:
            self.pos += 1
        return text, prefix

    def near(self, phrases: list[_Node], distance: int) -> _Node:
        if any(p is None for p in phrases):
            return None
        kept = [p for p in phrases if isinstance(p, _Phrase)]
        pairs = len(kept) * (len(kept) - 1) // 2
        if pairs and pairs * 2 * (distance + 1) > MAX_NEAR_ALTERNATIVES:
            self.note(f"NEAR(..., {distance}) is matched as all of its phrases anywhere in "
                      "the turn on PostgreSQL")
            node: _Node = kept[0]
            for p in kept[1:]:
                node = _combine("&", node, p)
            return node
        return _Near(tuple(kept), distance) if pairs else kept[0]

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _combine(op: str, left: _Node, right: _Node) -> _Node:
    """``left op right`` with nothing-matching operands folded away (as FTS5 does)."""
    if op == "&":
        if left is None or right is None:
            return None
    elif op == "|":
        if left is None or right is None:
            return right if left is None else left
    elif left is None or right is None:  # NOT
        return left
    if op != "!" and isinstance(left, _Op) and left.op == op:  # flatten a AND b AND c
        return _Op(op, (*left.children, right))
    return _Op(op, (left, right))


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _operand(text: str, prefix: bool, weights: frozenset[str]) -> str:
    flags = ("*" if prefix else "") + ("" if weights == ALL_WEIGHTS else "".join(sorted(weights)))
    return _quoted(text) + (":" + flags if flags else "")


def _phrase_text(phrase: _Phrase) -> str:
    parts = []
    for text, prefix in phrase.segments:
        if not _HAS_TOKEN.search(text):
            continue
        if prefix:  # FTS5: only the last word of the string is a prefix
            head, last, _ = _LAST_WORD.match(text).groups()  # type: ignore[union-attr]
            if _HAS_TOKEN.search(head):
                parts.append(_operand(head, False, phrase.weights))
            parts.append(_operand(last, True, phrase.weights))
        else:
            parts.append(_operand(text, False, phrase.weights))
    return " <-> ".join(parts)


def _text(node: _Node, depth: int = 0) -> str:
    if depth > MAX_DEPTH:
        raise FtsSyntaxError("fts5 expression tree is too large (maximum depth 256)")
    if isinstance(node, _Phrase):
        return "(" + _phrase_text(node) + ")"
    if isinstance(node, _Near):
        texts = [_text(p) for p in node.phrases]
        pairs = []
        for a, b in combinations(texts, 2):
            pairs.append("(" + " | ".join(
                f"{x} <{d}> {y}" for d in range(1, node.distance + 2)
                for x, y in ((a, b), (b, a))) + ")")
        return "(" + " & ".join(pairs) + ")"
    assert isinstance(node, _Op)
    inner = [_text(c, depth + 1) for c in node.children]
    if node.op == "!":
        return f"({inner[0]} & !{inner[1]})"
    return "(" + f" {node.op} ".join(inner) + ")"


def _positive_phrases(node: _Node) -> list[_Phrase]:
    """The phrases a match is ranked by (not those under a NOT's right side)."""
    if isinstance(node, _Phrase):
        return [node]
    if isinstance(node, _Near):
        return list(node.phrases)
    if isinstance(node, _Op):
        children = node.children[:1] if node.op == "!" else node.children
        return [p for c in children for p in _positive_phrases(c)]
    return []


# What a match needs of the units, leaving word order and distance out: a unit's place
# in ``Tsquery.units``, or ("&" | "|", the parts). A NEAR group needs all its phrases, a
# NOT its left side: every turn the query matches has the shape, and turns that do not
# may have it too (an index without positions can find the first, a superset).
Shape = int | tuple[str, tuple["Shape", ...]]


def _shape(node: _Node, units: dict[str, int]) -> Shape:
    if isinstance(node, _Phrase):
        return units[_phrase_text(node)]
    if isinstance(node, _Near):
        return ("&", tuple(_shape(p, units) for p in node.phrases))
    assert isinstance(node, _Op)
    if node.op == "!":
        return _shape(node.children[0], units)
    return (node.op, tuple(_shape(c, units) for c in node.children))


@dataclass(frozen=True)
class Tsquery:
    """A translated expression: the whole tsquery's text (None: it matches nothing),
    the text of each phrase it is ranked by (distinct, in order), notes on what
    PostgreSQL matches differently, and the shape of a match (``Shape``)."""

    text: str | None
    units: tuple[str, ...]
    notes: tuple[str, ...]
    shape: Shape | None = None


def translate(expression: str, *, own_words: bool = False) -> Tsquery:
    """``expression`` (FTS5 syntax) as tsquery text; ``own_words``: match the turn's own
    words only (the body column), as ``store.sqlite.search.match_expression`` does."""
    parser = _Parser(_tokens(expression))
    weights = frozenset(COLUMN_WEIGHTS["body"]) if own_words else ALL_WEIGHTS
    node = parser.binary(0, weights)
    parser.take("EOF")
    if node is None:
        return Tsquery(None, (), tuple(parser.notes))
    text = _text(node)
    units = tuple(dict.fromkeys(_phrase_text(p) for p in _positive_phrases(node)))
    shape = _shape(node, {u: i for i, u in enumerate(units)})
    return Tsquery(text, units, tuple(parser.notes), shape)
