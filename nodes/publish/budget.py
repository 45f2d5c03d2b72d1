"""Replies within a character budget: whole items, and a note of what was left out.

A reply is a title and sections. A section (``Group``) is a heading and its parts; a
part is an ``Item`` (lines shown whole or not at all: a turn, a decision, a hit) or a
``Group`` of its own (a list of decisions); an item at the cut may be shown as a group
of its parts (a brief: its header, then its milestones, decisions, blockers).
When a group does not fit, it keeps the parts that fit, from its start or, for
groups whose newest parts come last, from its end, and says in their place what it
left out: "… 3 more decisions (#12, #40, #41, …) left out: raise max_chars". The part
at the cut may itself be shown in part, with a note of its own. A heading is never
shown alone: a section that cannot show a part or its note is counted in one closing
line instead, and a group inside a section (a brief, its list of decisions) is shown
with at least one of its parts, or not at all.

A reply that picks its items by priority across sections instead (the session-start
briefing) counts them against the budget with ``Budget``: whole blocks or nothing, and
one note of how many were left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from nodes.publish.wording import counted

__all__ = ["NOTE_ROOM", "Budget", "Group", "Item", "fitted"]

MAX_REFS = 3  # ids a note names; the rest is "…"
RAISE = "raise max_chars"  # what a reply with a max_chars parameter advises
NOTE_ROOM = 100  # what a Budget keeps free for its note of what was left out


class Item(NamedTuple):
    """Lines shown whole, or (at the cut) as the group ``inner`` makes, or not at all.
    ``noun`` is what the item is when a note counts it ("decision"; ``plural_form`` when
    not noun + "s"), ``ref`` how it cites it. (Named tuples: a reply builds hundreds of
    these, three times faster than frozen dataclasses; ``inner`` is made only for the
    item at the cut.)"""

    lines: tuple[str, ...]
    noun: str
    ref: str
    plural_form: str | None = None
    inner: Callable[[], Group] | None = None  # the item as a group of its own parts


class Group(NamedTuple):
    """A heading and its parts. Left out as a whole, a group with a ``noun`` counts as
    one of those (a brief); one without counts its parts (its decisions)."""

    heading: tuple[str, ...]
    parts: tuple[Item | Group, ...]
    newest_last: bool = False  # keep the last parts when cutting (else the first)
    empty: str | None = None  # shown under the heading when there are no parts
    noun: str | None = None
    ref: str = ""
    closing: tuple[str, ...] = ()  # shown after the parts, with them


Part = Item | Group


def _cost(lines: Sequence[str]) -> int:
    return sum(map(len, lines)) + len(lines)  # each line with its newline


def _whole(part: Part) -> list[str]:
    if isinstance(part, Item):
        return list(part.lines)
    if not part.parts:
        return [*part.heading, part.empty] if part.empty is not None else []
    return [*part.heading, *(line for p in part.parts for line in _whole(p)), *part.closing]


def _counted_things(parts: Sequence[Part]) -> tuple[list[tuple[str, str | None, int]],
                                                    list[str]]:
    """What ``parts`` are, counted per noun in order of first appearance, and their refs."""
    counts: dict[str, int] = {}
    forms: dict[str, str | None] = {}
    refs: list[str] = []
    for part in parts:
        if isinstance(part, Item) or part.noun is not None:
            noun = part.noun
            assert noun is not None
            counts[noun] = counts.get(noun, 0) + 1
            forms.setdefault(noun, part.plural_form if isinstance(part, Item) else None)
            refs.append(part.ref)
        else:
            inner, inner_refs = _counted_things(part.parts)
            for noun, form, n in inner:
                counts[noun] = counts.get(noun, 0) + n
                forms.setdefault(noun, form)
            refs += inner_refs
    return [(noun, forms[noun], n) for noun, n in counts.items()], refs


def _kinds(part: Part) -> set[str]:
    """The nouns ``part`` counts as when left out."""
    if part.noun is not None:  # an item's always is
        return {part.noun}
    assert isinstance(part, Group)
    return {noun for noun, _, _ in _counted_things(part.parts)[0]}


def _summary(things: Sequence[tuple[str, str | None, int]], shown: set[str]) -> str:
    """"3 more decisions and 2 blockers" (``_counted_things``' counts): "more" where some
    of that kind are shown."""
    words = []
    for noun, form, n in things:
        more = "more " if noun in shown else ""
        words.append(counted(n, more + noun, form and more + form))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _note(parts: Sequence[Part], shown: set[str], newest_last: bool, advice: str) -> str:
    """"… 3 more decisions (#12, #40, #41, …) left out: raise max_chars": the refs
    nearest the cut (for groups kept from their end, the newest), in document order."""
    things, all_refs = _counted_things(parts)
    refs = list(dict.fromkeys(all_refs))
    if len(refs) <= MAX_REFS:
        cited = refs
    elif newest_last:
        cited = ["…", *refs[-MAX_REFS:]]
    else:
        cited = [*refs[:MAX_REFS], "…"]
    return f"… {_summary(things, shown)} ({', '.join(cited)}) left out: {advice}"


def _note_bound(parts: Sequence[Part], advice: str) -> int:
    """What a note of any of ``parts`` costs at most: all of them counted, every kind
    "more", the longest refs."""
    things, refs = _counted_things(parts)
    summary = _summary(things, {noun for noun, _, _ in things})
    longest = sorted((len(r) for r in set(refs)), reverse=True)[:MAX_REFS]
    cited = sum(longest) + 2 * MAX_REFS + 1  # the refs, their ", " and a "…"
    return len(f"… {summary} () left out: {advice}") + cited + 1


def _fit(group: Group, room: int, advice: str, *, alone: bool) -> list[str] | None:
    """The lines of ``group`` within ``room`` characters: all of it, or its heading,
    the parts that fit (the one at the cut possibly in part) and a note of the rest;
    None when nothing of it can be shown (``alone``: its heading and a note count).
    A group without parts shows its ``empty`` line if it fits."""
    whole = _whole(group)
    cost = _cost(whole)
    if cost <= room or not group.parts:  # all of it, or nothing left out
        return whole if whole and cost <= room else None
    parts = list(group.parts)
    order = list(reversed(range(len(parts)))) if group.newest_last else list(range(len(parts)))
    used = _cost(group.heading) + _cost(group.closing)
    shown: dict[int, list[str]] = {}
    kinds: set[str] = set()  # of the parts shown
    left: list[int] = order
    bound = _note_bound(parts, advice)  # no note of these parts is longer

    def note_cost(rest: list[int], seen: set[str]) -> int:
        return _cost([_note([parts[i] for i in rest], seen, group.newest_last, advice)]
                     ) if rest else 0

    for n, index in enumerate(order):
        after, lines = order[n + 1:], _whole(parts[index])
        seen = kinds | _kinds(parts[index])
        cost = _cost(lines)
        # what the note of the parts after this one takes (any note fits within bound)
        rest = 0 if used + cost + bound <= room else note_cost(after, seen)
        if used + cost + rest <= room:
            shown[index] = lines
            used += cost
            kinds, left = seen, after
            continue
        part = parts[index]
        inner = part if isinstance(part, Group) else part.inner() if part.inner else None
        if inner is not None:
            partial = _fit(inner, room - used - rest, advice, alone=False)
            if partial is not None:
                shown[index] = partial
                kinds, left = seen, after
        break
    if not shown:
        if not alone:
            return None
        lines = [*group.heading, _note(parts, set(), group.newest_last, advice)]
        return lines if _cost(lines) <= room else None
    note = _note([parts[i] for i in sorted(left)], kinds, group.newest_last, advice) if left \
        else None
    body = [line for i in sorted(shown) for line in shown[i]]
    if note is not None:
        body = [note, *body] if group.newest_last else [*body, note]
    return [*group.heading, *body, *group.closing]


def fitted(max_chars: int, title: Sequence[str], sections: Sequence[tuple[Group, int]],
           advice: str = RAISE) -> str:
    """``title`` and ``sections`` in order within ``max_chars``; each section paired
    with the room it keeps free for the sections after it, which need it first. A
    section that got no room is tried again with what the later ones left over; one
    that shows nothing of its parts, not even its note, is counted in a closing line.
    ``advice`` ends every note: how to see what was left out."""
    every = [part for s, _ in sections for part in s.parts]
    closing_room = _cost([_closing_line(every, max_chars, advice)])
    used = _cost(title)
    shown: list[list[str] | None] = []
    for section, keep_free in sections:
        lines = _fit(section, max_chars - used - keep_free - closing_room, advice, alone=True)
        shown.append(lines)
        used += _cost(lines or [])
    for n, (section, _) in enumerate(sections):
        if shown[n] is not None or not section.parts:
            continue
        others = [p for (s, _), out in zip(sections, shown, strict=True)
                  if out is None and s is not section for p in s.parts]
        room = max_chars - used - (_cost([_closing_line(others, max_chars, advice)])
                                   if others else 0)
        shown[n] = _fit(section, room, advice, alone=True)
        used += _cost(shown[n] or [])
    dropped = [p for (s, _), out in zip(sections, shown, strict=True) if out is None
               for p in s.parts]
    lines = [*title, *(line for out in shown for line in out or [])]
    if dropped:
        lines.append(_closing_line(dropped, max_chars, advice))
    return "\n".join(lines)


def _closing_line(parts: Sequence[Part], max_chars: int, advice: str) -> str:
    if not parts:
        return ""
    return (f"… {_summary(_counted_things(parts)[0], set())} left out to stay within "
            f"{max_chars:,} characters: {advice}")


class Budget:
    """Blocks of lines added in priority order while they fit, and a note of how many
    did not: ``note`` is formatted with ``more`` ("3 more items") and ``max_chars``."""

    def __init__(self, max_chars: int, note: str) -> None:
        self.max_chars = max_chars
        self.lines: list[str] = []
        self.used = 0
        self.omitted = 0
        self.note = note

    def add(self, line: str) -> bool:
        """Add a line if it fits; else count it."""
        return self.add_block([line])

    def add_block(self, lines: Sequence[str]) -> bool:
        """Add lines that belong together (an item and its details) all or none: an item
        is never cut in half. Counts one omission when they do not fit."""
        cost = _cost(lines)
        if self.used + cost > self.max_chars - NOTE_ROOM:
            self.omitted += 1
            return False
        self.lines.extend(lines)
        self.used += cost
        return True

    def text(self) -> str:
        out = list(self.lines)
        if self.omitted:
            note = self.note.format(more=counted(self.omitted, "more item"),
                                    max_chars=self.max_chars)
            out.append(note[:NOTE_ROOM - 1])
        return "\n".join(out)
