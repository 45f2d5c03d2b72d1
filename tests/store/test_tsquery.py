"""FTS5 expressions as tsqueries (store.postgres.tsquery): the translation accepts
exactly what SQLite's FTS5 accepts (checked against FTS5 itself), and writes user text
only inside quoted, escaped operands."""

from __future__ import annotations

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.migrations import CREATE_FTS_WITH_FIELDS
from store.postgres.tsquery import translate
from store.search import FtsSyntaxError

TOKENS = ['"', "(", ")", "AND", "OR", "NOT", "NEAR", "NEAR(", "*", "^", ":", "body:", "scope:",
          "context", "{", "}", "-", "+", ",", "x", "y", "5", "99999999999999999999", "é", ".",
          "'", "\\", "\t", "\x1a", "and", "{body dated}"]


@pytest.fixture(scope="module")
def fts() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(CREATE_FTS_WITH_FIELDS)
    return conn


def fts5_accepts(conn: apsw.Connection, expression: str) -> bool:
    try:
        list(conn.execute("SELECT rowid FROM exchanges_fts WHERE exchanges_fts MATCH ?",
                          (expression,)))
    except apsw.SQLError:
        return False
    return True


def translates(expression: str) -> bool:
    try:
        translate(expression)
    except FtsSyntaxError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=8).map(" ".join),
                 st.lists(st.sampled_from(TOKENS), max_size=8).map("".join),
                 st.text(max_size=20)))
def test_what_fts5_accepts_is_translated_and_nothing_else(fts: apsw.Connection,
                                                          expression: str):
    assert translates(expression) == fts5_accepts(fts, expression), expression


@pytest.mark.parametrize(("expression", "text"), [
    ('"ledger" OR "review"', "(('ledger') | ('review'))"),
    ("a b NOT c", "((('a') & ('b')) & !('c'))"),
    ("a OR b c", "(('a') | (('b') & ('c')))"),
    ('"a b"*', "('a ' <-> 'b':*)"),
    ("a + b*", "('a' <-> 'b':*)"),
    ("{body context}: x", "('x':AC)"),
    ("-body: x", "('x':BC)"),
    ("NEAR(a b, 0)", "((('a') <1> ('b') | ('b') <1> ('a')))"),
    ("it's", None),  # not FTS5: raises
    ("\"it's \\ x\"", "('it''s \\\\ x')"),
    ("x\0 (", "('x')"),  # FTS5 reads up to a NUL
])
def test_translations(expression: str, text: str | None):
    if text is None:
        with pytest.raises(FtsSyntaxError):
            translate(expression)
        return
    assert translate(expression).text == text


def test_the_callers_syntax_matches_the_turns_own_words():
    assert translate("x OR context: y", own_words=True).text == "('x':A)"
    assert translate("scope:s1 x", own_words=False).text is None  # no words in the scope
    assert translate('"." AND x').text is None  # an empty phrase matches nothing, as in FTS5
    assert translate('"." OR x').text == "('x')"


def test_approximations_are_noted():
    assert translate("^x").notes and translate("NEAR(a b, 50)").notes
    assert translate("NEAR(a b, 50)").text == "(('a') & ('b'))"
    assert not translate("NEAR(a b, 10)").notes


@pytest.mark.parametrize(("expression", "units", "shape"), [
    ('"billing api" OR redis', ("'billing api'", "'redis'"), ("|", (0, 1))),
    ("migrat* snapshot", ("'migrat':*", "'snapshot'"), ("&", (0, 1))),
    ("NEAR(a b, 5)", ("'a'", "'b'"), ("&", (0, 1))),  # without the distance
    ("x NOT y", ("'x'",), 0),  # what a match needs: its left side
    ("(a OR b) AND NEAR(c a, 2)", ("'a'", "'b'", "'c'"), ("&", (("|", (0, 1)), ("&", (2, 0))))),
])
def test_the_shape_of_a_match_leaves_out_order_and_distance(
        expression: str, units: tuple[str, ...], shape: object):
    found = translate(expression)
    assert (found.units, found.shape) == (units, shape)
