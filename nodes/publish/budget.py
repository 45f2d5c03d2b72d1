"""Replies within a character budget: whole lines, and a note of what was left out."""

from __future__ import annotations

__all__ = ["Budget"]


class Budget:
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.lines: list[str] = []
        self.used = 0
        self.omitted = 0

    def add(self, line: str, *, reserve: int = 0) -> bool:
        """Add a line if it fits (keeping ``reserve`` characters free); else count it."""
        cost = len(line) + 1
        if self.used + cost + reserve > self.max_chars - 100:  # room for the note (<= 93 chars)
            self.omitted += 1
            return False
        self.lines.append(line)
        self.used += cost
        return True

    def text(self) -> str:
        out = list(self.lines)
        if self.omitted:
            out.append(f"… {self.omitted} more line(s) omitted to stay within "
                       f"{self.max_chars:,} characters (raise max_chars to see more)")
        return "\n".join(out)
