"""A hit's snippet: a window of the turn, its whitespace runs made single spaces,
around the first query word it holds."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.load_evidence.hit_rows import snippet

# every character str.split() splits on, a few that it does not, and word characters
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
ALPHABET = [*"abc xyz ", *WHITESPACE, "\x00", "\u200b", "\ufeff", "é", "İ", "ß"]


def window(content: str, terms: list[str], width: int) -> str:
    """The snippet as defined: the words joined by single spaces, cut around the first
    term found (the start when none is)."""
    flat = " ".join(content.split())
    lower = flat.lower()
    first = min((p for p in (lower.find(t) for t in terms) if p >= 0), default=0)
    start = max(0, min(first - width // 4, len(flat) - width))
    return (("…" if start > 0 else "") + flat[start : start + width]
            + ("…" if start + width < len(flat) else ""))


@settings(max_examples=400, deadline=None)
@given(content=st.lists(st.sampled_from(ALPHABET), max_size=400).map("".join),
       terms=st.lists(st.sampled_from(["abc", "xyz", "a", "zz", "ss", "i̇"]), max_size=3),
       width=st.sampled_from([10, 240]))
def test_a_snippet_is_the_window_of_the_words_joined_by_single_spaces(
        content: str, terms: list[str], width: int):
    assert snippet(content, terms, width) == window(content, terms, width)


def test_a_turn_already_flat_and_one_with_other_whitespace_give_the_same_snippet():
    flat = "We decided to use SQLite for tracing. " * 12 + "The relay holds."
    assert snippet(flat, ["relay"]) == window(flat, ["relay"], 240)
    spaced = " " + flat.replace(" ", "\u00a0 \t", 7).replace(". ", ".\n\n") + "\u3000"
    assert snippet(spaced, ["relay"]) == snippet(flat, ["relay"])
    for edge in (" lead", "trail ", "two  spaces", "tab\there", "line\nbreak"):
        assert snippet(edge, []) == " ".join(edge.split())
