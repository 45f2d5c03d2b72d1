"""Counts in replies and command output agree with their nouns ("1 session", "2
sessions"): every count goes through ``nodes.publish.wording.counted``.

The source is read, not run: an f-string that puts a number right before a plural
noun ("{n} sessions") or hedges with "(s)" reads wrong for one of its values, so none
may remain in the code that renders replies and command output (rates such as
"turns/s" and module constants are not counts of that kind).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from nodes.publish.wording import counted, plural

REPO_ROOT = Path(__file__).resolve().parents[2]
RENDERING = ("stenographer", "graphs", "nodes", "store")

# Words that are counted somewhere in a reply, a status line or a command's output.
COUNTED_NOUNS = (
    "turns", "sessions", "briefs", "milestones", "exchanges", "files", "hits", "lines",
    "events", "batches", "retries", "contracts", "violations", "checks", "entities",
    "edges", "nodes", "rows", "traces", "texts", "vectors", "attempts", "decisions",
    "blockers", "items", "calls", "requests", "flags", "tombstones", "pages", "ids",
)
_ADJECTIVES = r"(?:(?:more|new|other|uncompressed|compressed|forgotten|pending|stored|" \
              r"shutdown|tool|milestone|stage|graph|sync|NAFE|edge|entity|origin) )*"
_HEDGE = re.compile(r"^ " + _ADJECTIVES + r"[A-Za-z_-]+\(s\)")
_PLURAL = re.compile(r"^ " + _ADJECTIVES + r"(?:" + "|".join(COUNTED_NOUNS) + r")\b(?!/)")


def _constant(expr: ast.expr) -> bool:
    """A module constant (MAX_FORGET_IDS): a count fixed by the code, never 1."""
    return isinstance(expr, ast.Name) and expr.id.isupper()


def _bare_counts(path: Path) -> list[str]:
    """"{count} nouns" and "{count} noun(s)" in the f-strings of one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, after in zip(node.values, node.values[1:], strict=False):
            if (isinstance(value, ast.FormattedValue) and not _constant(value.value)
                    and isinstance(after, ast.Constant) and isinstance(after.value, str)
                    and (_HEDGE.match(after.value) or _PLURAL.match(after.value))):
                where = path.relative_to(REPO_ROOT)
                found.append(f"{where}:{node.lineno}: {{{ast.unparse(value.value)}}}"
                             f"{after.value[:30]!r}")
    return found


def test_no_reply_puts_a_bare_count_before_a_plural_noun() -> None:
    found = [hit for package in RENDERING
             for path in sorted((REPO_ROOT / package).rglob("*.py"))
             for hit in _bare_counts(path)]
    assert found == [], "use nodes.publish.wording.counted:\n" + "\n".join(found)


@pytest.mark.parametrize(("count", "noun", "form", "expected"), [
    (0, "session", None, "0 sessions"),
    (1, "session", None, "1 session"),
    (2, "new turn", None, "2 new turns"),
    (1_234, "brief", None, "1,234 briefs"),
    (1, "entity", "entities", "1 entity"),
    (3, "entity", "entities", "3 entities"),
    (-1, "retry", "retries", "-1 retries"),
])
def test_counted_agrees_with_its_count(count: int, noun: str, form: str | None,
                                       expected: str) -> None:
    assert counted(count, noun, form) == expected
    assert plural(count, noun, form) == expected.split(" ", 1)[1]
