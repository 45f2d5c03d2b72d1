"""The turns around a turn in its session: what the search indexes borrow from them."""

from __future__ import annotations

from collections.abc import Sequence

from store.dialect import dialect
from store.sql import Conn, all_rows

__all__ = ["NEIGHBOUR_CHARS", "answers_to", "previous_contents"]

NEIGHBOUR_CHARS = 4_000  # of each neighbouring turn: its head says what it is about

SELECT_PREVIOUS = """
SELECT substr(e.content, 1, ?3) FROM exchanges e
WHERE e.session_id = (SELECT id FROM sessions WHERE name = ?1)
ORDER BY e.id DESC LIMIT ?2"""


def previous_contents(conn: Conn, session: str, count: int) -> list[str]:
    """The newest ``count`` turns of a session (by name), nearest first, each cut to
    NEIGHBOUR_CHARS characters. Read before a new turn is stored, these are the turns
    just before it."""
    return [str(r[0]) for r in all_rows(conn, SELECT_PREVIOUS, (session, count,
                                                                 NEIGHBOUR_CHARS))]


SELECT_ANSWERS = """
SELECT e.id, (SELECT n.id FROM exchanges n WHERE n.session_id = e.session_id AND n.id > e.id
              ORDER BY n.id LIMIT 1)
FROM exchanges e WHERE e.id IN ({marks}) AND ({asks})"""


def answers_to(conn: Conn, ids: Sequence[int]) -> dict[int, int]:
    """For the turns among ``ids`` that ask (their text's last character that is not
    whitespace is a question mark, ASCII or full-width): the id of the next turn in
    their session (the one that answers), when there is one."""
    if not ids:
        return {}
    sql = SELECT_ANSWERS.format(marks=",".join("?" * len(ids)), asks=dialect(conn).asks)
    return {int(q): int(a) for q, a in all_rows(conn, sql, list(ids)) if a is not None}
