"""Node: the briefing a host adds to the context when a session starts, as Markdown
within a character budget, every item citing the turn it comes from (``#id``).

After a compaction or on resume (one session): its open blockers, milestones,
decisions, last requests, the briefs that match those requests, and the blockers a
later turn fixed. At startup (the previous sessions of the project directory, half the
budget): per session its open blockers, milestones, last request and newest decisions.

Items are chosen by priority until the budget is spent, whole or not at all (an item
and its lines are never cut), then shown grouped by section in reading order: open
blockers before everything else, decisions oldest first. A decision already cited by
a chosen brief is not repeated, nor a brief line already shown as an item. Every line
passes the secret detector on its way out, whatever the store holds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.secrets import redact
from nodes.publish.budget import Budget
from nodes.publish.wording import counted

__all__ = ["NEWEST_DECISIONS", "TOP_BRIEFS", "briefing_markdown"]

NEWEST_DECISIONS = 5  # shown before the decisions that match the last requests
RELEVANT_DECISIONS = 10
TOP_BRIEFS = 3
PROJECT_DECISIONS = 8  # per previous session, at startup
ITEM_CHARS = 220
ASK_CHARS = 300
NOTE = ("… {more} left out to stay within {max_chars:,} characters: "
        "stenographer_query_history finds them")

# Sections in reading order.
HEAD, OPEN, MILESTONES, ASKED, DECISIONS, BRIEFS, RESOLVED = range(7)
_TITLES = {OPEN: "Open blockers", MILESTONES: "Milestones", ASKED: "Last requests",
           DECISIONS: "Decisions", BRIEFS: "Briefs matching the last requests",
           RESOLVED: "Blockers fixed later"}
_ORDER = {OPEN: ", newest first", DECISIONS: ", oldest first"}


@dataclass
class _Item:
    session: int  # which briefed session (0 after a compaction)
    section: int
    order: float  # place within the section
    lines: list[str]
    cites: tuple[int, str] | None = None  # (turn, text) an item line or a brief line shows


@dataclass
class _Plan:
    """Items chosen in priority order; shown in reading order."""

    max_chars: int
    level: str  # "##" for one session, "###" under a session's own heading
    secrets: Sequence[re.Pattern[str]] = ()  # the operator's extra secret patterns
    budget: Budget = field(init=False)
    chosen: list[_Item] = field(default_factory=list)
    totals: dict[tuple[int, int], int] = field(default_factory=dict)
    cited: set[tuple[int, str]] = field(default_factory=set)
    sections: set[tuple[int, int]] = field(default_factory=set)  # (session, section) begun
    left_out: int = 0

    def __post_init__(self) -> None:
        self.budget = Budget(self.max_chars, NOTE)

    def _heading(self, session: int, section: int, shown: int | None) -> str:
        """A section's heading with its count; ``shown`` None: the longest it can be."""
        total = self.totals.get((session, section), 1)
        count = (f"{total} of {total}" if shown is None
                 else f"{shown}" if shown == total else f"{shown} of {total}")
        return f"{self.level} {_TITLES[section]} ({count}{_ORDER.get(section, '')})"

    def offer(self, item: _Item) -> bool:
        if item.cites is not None and item.cites in self.cited:
            return False  # already shown (inside a brief)
        # Stored turns are redacted when they are recorded (STENO_REDACT_SECRETS); these
        # lines go into an agent's context, so they are redacted again whatever the
        # setting was when each turn was stored.
        item.lines = [redact(line, self.secrets).text for line in item.lines]
        lines = list(item.lines)
        where = (item.session, item.section)
        if item.section != HEAD and where not in self.sections:  # its heading comes too
            lines.insert(0, self._heading(item.session, item.section, None))
        if not self.budget.add_block(lines):
            self.left_out += 1
            return False
        self.chosen.append(item)
        self.sections.add(where)
        if item.cites is not None:
            self.cited.add(item.cites)
        return True

    def text(self) -> str:
        out = Budget(self.max_chars, NOTE)
        keyed = sorted(self.chosen, key=lambda c: (c.session, c.section, c.order))
        for n, item in enumerate(keyed):
            first = n == 0 or (keyed[n - 1].session, keyed[n - 1].section) != (
                item.session, item.section)
            if first and item.section != HEAD:
                shown = sum(1 for c in keyed
                            if (c.session, c.section) == (item.session, item.section))
                out.add(self._heading(item.session, item.section, shown))
            out.add_block(item.lines)
        out.omitted = self.left_out
        return out.text()


def _flat(text: str, limit: int) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _key(turn_id: int, text: str) -> tuple[int, str]:
    return int(turn_id), _flat(text, 60).rstrip("…")[:50]


def _signal_items(n: int, s: dict[str, Any], plan: _Plan) -> dict[str, list[_Item]]:
    """The items of one session by kind, each list in priority order."""
    plan.totals[(n, OPEN)] = len(s["open_blockers"])
    plan.totals[(n, MILESTONES)] = len(s["milestones"])
    plan.totals[(n, RESOLVED)] = len(s["resolved_blockers"])
    plan.totals[(n, ASKED)] = len(s["asked"])
    seen: set[str] = set()
    decisions = []
    for turn_id, text in reversed(s["decisions"]):  # newest first; a repeated one once
        said = " ".join(text.split()).casefold()
        if said in seen:
            continue
        seen.add(said)
        decisions.append(_Item(n, DECISIONS, turn_id,
                               [f"- #{turn_id} {_flat(text, ITEM_CHARS)}"],
                               _key(turn_id, text)))
    plan.totals[(n, DECISIONS)] = len(decisions)
    return {
        "open": [_Item(n, OPEN, -i, [f"- #{i} {_flat(t, ITEM_CHARS)}"], _key(i, t))
                 for i, t in reversed(s["open_blockers"])],
        "milestones": [_Item(n, MILESTONES, i, [f"- #{i} **{_flat(label, 80)}**: "
                                                f"{_flat(excerpt, 160)}"])
                       for i, label, excerpt in reversed(s["milestones"])],
        "asked": [_Item(n, ASKED, k, [f"- #{i} ({when}): {_flat(text, ASK_CHARS)}"])
                  for k, (i, when, text, _) in enumerate(s["asked"])],
        "decisions": decisions,
        "resolved": [_Item(n, RESOLVED, i, [f"- #{i} fixed in #{fix}: {_flat(t, 160)}"])
                     for i, t, fix in reversed(s["resolved_blockers"])],
    }


def _brief_item(rank: int, brief: dict[str, Any], cited: set[tuple[int, str]]) -> _Item | None:
    """A brief's heading and body, less the lines already shown; None when nothing new
    is left."""
    body: list[str] = []
    label: str | None = None
    shown = 0
    for line in str(brief["body"]).splitlines():
        if line.endswith(":") and not line.startswith("- "):  # "Decisions:" and the like
            label = line
            continue
        if line.startswith("- #"):
            turn, _, rest = line[3:].partition(" ")
            if turn.isdigit() and _key(int(turn), rest) in cited:
                continue
            if label is not None:
                body.append(label)
                label = None
            shown += 1
        body.append(line)
    if not shown:
        return None
    score = f", score {brief['score']:.3f}" if brief.get("score") is not None else ""
    return _Item(0, BRIEFS, rank, [f"#### Brief {brief['id']} (tier-{brief['tier']}{score})",
                                   *body])


def _head(scope: str, source: str, cwd: str | None, sessions: list[dict[str, Any]]
          ) -> list[str]:
    if scope == "session":
        s = sessions[0]
        when = {"compact": "after compaction", "resume": "resumed"}.get(source, source)
        return [f"# Stenographer briefing: session {s['session']} ({when})",
                f"{counted(s['turns'], 'turn')} recorded {s['created_at']} – {s['last_at']}; "
                "no model "
                "wrote this, every line is extracted from the record. Each #id is a stored "
                "turn: stenographer_query_history (session_id "
                f"{s['session']!r}) shows it in full."]
    return [f"# Stenographer briefing: previous sessions in {cwd}",
            "No model wrote this: every line is extracted from the record. Each #id is a "
            "stored turn: stenographer_query_history with its session_id shows it in full."]


class Briefing(TypedDict):
    scope: str
    briefing: str | None  # None: nothing to say


class BriefingMarkdownWrites(TypedDict):
    reply: Briefing


@node
def briefing_markdown(sessions: Any, scope: Any, max_chars: Any, ranked: Any, briefs: Any,
                      source: Any, cwd: Any, *, run: RunContext) -> BriefingMarkdownWrites:
    sessions = sessions or []
    if not sessions:
        return {"reply": {"scope": str(scope), "briefing": None}}
    one = scope == "session"
    max_chars = int(max_chars)
    plan = _Plan(max_chars if one else max_chars // 2, "##" if one else "###",
                 run.secret_patterns)
    plan.offer(_Item(0, HEAD, 0, _head(scope, source, cwd, sessions)))
    kinds = [_signal_items(n, s, plan) for n, s in enumerate(sessions)]
    if not one:
        headed = [plan.offer(_Item(n, HEAD, 1, [f"## Session {s['session']} (last active "
                                                f"{s['last_at']}, {counted(s['turns'], 'turn')})"]))
                  for n, s in enumerate(sessions)]
        for kind, limit in (("open", None), ("milestones", None), ("asked", 1),
                            ("decisions", PROJECT_DECISIONS)):
            for items, shown in zip(kinds, headed, strict=True):
                for item in items[kind][:limit] if shown else ():
                    plan.offer(item)
        return {"reply": {"scope": str(scope), "briefing": plan.text()}}
    items = kinds[0]
    for item in items["open"] + items["milestones"] + items["asked"][:1]:
        plan.offer(item)
    decisions = items["decisions"]
    for item in decisions[:NEWEST_DECISIONS]:
        plan.offer(item)
    scores = {int(i): float(score) for i, score in ranked or []}
    relevant = sorted((d for d in decisions[NEWEST_DECISIONS:] if int(d.order) in scores),
                      key=lambda d: -scores[int(d.order)])
    for item in relevant[:RELEVANT_DECISIONS]:
        plan.offer(item)
    briefs = briefs or []
    plan.totals[(0, BRIEFS)] = len(briefs)
    _offer_brief(plan, 0, briefs)  # the best brief, then every decision, then the others
    for item in decisions[NEWEST_DECISIONS:]:
        plan.offer(item)
    for rank in range(1, TOP_BRIEFS):
        _offer_brief(plan, rank, briefs)
    for item in items["asked"][1:] + items["resolved"]:
        plan.offer(item)
    return {"reply": {"scope": str(scope), "briefing": plan.text()}}


def _offer_brief(plan: _Plan, rank: int, briefs: list[dict[str, Any]]) -> None:
    if rank < len(briefs):
        found = _brief_item(rank, briefs[rank], plan.cited)
        if found is not None and plan.offer(found):
            plan.cited.update(_brief_lines(briefs[rank]))


def _brief_lines(brief: dict[str, Any]) -> set[tuple[int, str]]:
    """What a brief's ``- #id text`` lines cite."""
    out = set()
    for line in str(brief["body"]).splitlines():
        if line.startswith("- #"):
            turn, _, rest = line[3:].partition(" ")
            if turn.isdigit():
                out.add(_key(int(turn), rest))
    return out
