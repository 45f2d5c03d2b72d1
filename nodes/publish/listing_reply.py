"""Nodes: the text of the session listing and of the store statistics."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.publish.wording import counted

__all__ = ["human_bytes", "sessions_text", "stats_text"]


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class SessionsTextWrites(TypedDict):
    text: Any


@node
def sessions_text(sessions: Any, total: Any, listing: Any) -> SessionsTextWrites:
    sessions = sessions or []
    total = total or 0
    if not sessions:
        return {"text": "No sessions recorded yet."}
    width = max(7, *(len(s["session_id"]) for s in sessions))
    lines = [f"{'session':<{width}}  {'turns':>6}  {'live':>5}  {'briefs':>6}  "
             f"{'miles':>5}  last activity"]
    for s in sessions:
        lines.append(f"{s['session_id']:<{width}}  {s['turns']:>6}  {s['uncompressed']:>5}  "
                     f"{s['briefs']:>6}  {s['milestones']:>5}  {s['last_at']}")
    offset = (listing or {}).get("offset", 0)
    footer = f"sessions {offset + 1}-{offset + len(sessions)} of {total}"
    if offset + len(sessions) < total:
        footer += f"; more with --offset {offset + len(sessions)}"
    return {"text": "\n".join([*lines, footer])}


class StatsTextWrites(TypedDict):
    text: Any


@node
def stats_text(stats: Any) -> StatsTextWrites:
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
    return {"text": "\n".join(lines)}
