"""Replies within a character budget: whole lines (or whole blocks of lines), and a note
of what was left out."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NOTE_ROOM", "Budget"]

NOTE_ROOM = 100  # kept free for the note of what was left out (at most this long)
DEFAULT_NOTE = ("… {omitted} more line(s) omitted to stay within {max_chars:,} characters "
                "(raise max_chars to see more)")


class Budget:
    def __init__(self, max_chars: int, note: str = DEFAULT_NOTE) -> None:
        self.max_chars = max_chars
        self.lines: list[str] = []
        self.used = 0
        self.omitted = 0
        self.note = note  # formatted with ``omitted`` and ``max_chars``

    def add(self, line: str, *, reserve: int = 0) -> bool:
        """Add a line if it fits (keeping ``reserve`` characters free); else count it."""
        return self.add_block([line], reserve=reserve)

    def add_block(self, lines: Sequence[str], *, reserve: int = 0) -> bool:
        """Add lines that belong together (an item and its details) all or none: an item
        is never cut in half. Counts one omission when they do not fit."""
        cost = sum(len(line) + 1 for line in lines)
        if self.used + cost + reserve > self.max_chars - NOTE_ROOM:
            self.omitted += 1
            return False
        self.lines.extend(lines)
        self.used += cost
        return True

    def text(self) -> str:
        out = list(self.lines)
        if self.omitted:
            note = self.note.format(omitted=self.omitted, max_chars=self.max_chars)
            out.append(note[:NOTE_ROOM - 1])
        return "\n".join(out)
