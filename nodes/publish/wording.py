"""Words in replies: counts ("1 session", "2 sessions", "1,234 turns") and clipped text.

Every reply and command that puts a number before a noun goes through ``counted``, so
that no reply says "1 sessions" or hedges with "session(s)".
"""

from __future__ import annotations

__all__ = ["clipped", "counted", "plural"]


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``noun`` as it reads after ``count``: "turn" for 1, "turns" otherwise.

    A noun whose plural is not noun + "s" names it: ``plural(n, "entity", "entities")``.
    Only the last word changes: ``plural(2, "new turn")`` is "new turns"."""
    if count == 1:
        return noun
    return plural_form if plural_form is not None else noun + "s"


def counted(count: int, noun: str, plural_form: str | None = None) -> str:
    """The count (with thousands separators) and the noun in the form it takes."""
    return f"{count:,} {plural(count, noun, plural_form)}"


def clipped(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), at most ``limit``
    characters, ending with "…" when it was cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
