"""Nodes: the replies of the session listing and of the store statistics."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.publish.wording import counted

__all__ = ["SessionsReply", "StatsReply", "human_bytes", "sessions_text", "stats_text"]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class SessionsReply(TypedDict):
    """A page of sessions (newest activity first), the number of sessions, where the
    page starts, the store's counts, and the page as a table."""

    sessions: list[dict[str, Any]]
    total: int
    offset: int
    counts: dict[str, Any]
    text: str


class SessionsTextWrites(TypedDict):
    reply: SessionsReply


@node
def sessions_text(sessions: list[dict[str, Any]], total: int, counts: dict[str, Any],
                  listing: dict[str, Any]) -> SessionsTextWrites:
    offset = int(listing.get("offset", 0))
    return {"reply": SessionsReply(sessions=sessions, total=total, offset=offset,
                                   counts=counts, text=_sessions_table(sessions, total, offset))}


def _sessions_table(sessions: list[dict[str, Any]], total: int, offset: int) -> str:
    if not sessions:
        return "No sessions recorded yet."
    width = max(7, *(len(s["session_id"]) for s in sessions))
    lines = [f"{'session':<{width}}  {'turns':>6}  {'live':>5}  {'briefs':>6}  "
             f"{'miles':>5}  last activity"]
    for s in sessions:
        lines.append(f"{s['session_id']:<{width}}  {s['turns']:>6}  {s['uncompressed']:>5}  "
                     f"{s['briefs']:>6}  {s['milestones']:>5}  {s['last_at']}")
    footer = f"sessions {offset + 1}-{offset + len(sessions)} of {total}"
    if offset + len(sessions) < total:
        footer += f"; more with --offset {offset + len(sessions)}"
    return "\n".join([*lines, footer])


class StatsReply(TypedDict):
    """What the store holds and occupies, and the same as text."""

    stats: dict[str, Any]
    text: str


class StatsTextWrites(TypedDict):
    reply: StatsReply


@node
def stats_text(stats: dict[str, Any]) -> StatsTextWrites:
    st = stats
    counts, size, schema = st["counts"], st["size"], st["schema"]
    lines = [
        f"Store {st['path']}",
        "  " + ", ".join(f"{k} {v:,}" for k, v in counts.items()),
        f"  size {human_bytes(size['database_bytes'])} in {counted(size['page_count'], 'page')} of "
        f"{size['page_size']:,} B ({size['free_pages']:,} free); WAL "
        f"{human_bytes(size['wal_bytes'])}",
        f"  schema version {schema['version']} (this build expects {schema['expected']}): "
        + ("current" if schema["current"] else "NOT current"),
    ]
    if st["tables"] is None:
        lines.append("  bytes per table: unavailable (SQLite built without dbstat)")
    else:
        lines.append("  bytes per table (indexes and shadow tables included):")
        width = max((len(n) for n in st["tables"]), default=0)
        lines += [f"    {name:<{width}}  {human_bytes(n):>10}" for name, n in st["tables"].items()]
    return {"reply": StatsReply(stats=stats, text="\n".join(lines))}
