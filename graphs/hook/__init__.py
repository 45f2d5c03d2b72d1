"""hook: what a host's hook call does (``stenographer hook``), one run per call.

The event → for ``SessionStart`` the briefing route, for every other event
(``PreCompact``, ``Stop``, Codex's notify...) the capture route.

Briefing (what a host adds to the context when a session starts): validate → after a
compaction or on resume: the session's milestones, decisions, blockers and last user
requests; at startup: those of the previous sessions of the project directory; for an
unknown session or another source: nothing → which blockers a later turn fixed → (with
a query made of the last requests: keyword candidates among the compressed turns before
them, briefs ranked by their hit turns as the compaction guard ranks them) → Markdown
within the briefing budget. The guard's ranking without its vector lists: a hook
answers from a fresh process within the host's time budget, where the hashed vectors
(a fuzzy signal worth 0.3 of a keyword match at most) would cost numpy's import and a
copy of every stored vector, and an embedding provider a network call.

Capture: one pass of the ``capture`` graph's stages over the transcripts the host names
(graphs.capture ``pass_stages``), so that every message is stored before the host
summarises it.

The reply is the route's: ``{"scope", "briefing"}`` (the Markdown, or None when there
is nothing to say), or the capture pass's ``{"files"}``. A node's module is imported
when the node first runs, so a briefing never imports what capturing needs.
"""

from typing import Any

from graphs.capture import ERRORS, PASS_CHANNELS, pass_stages
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["BRIEFING_CHANNELS", "DEFINITION", "briefing_stages"]

BRIEFING_CHANNELS = ("session", "session_row", "source", "cwd", "max_chars", "scope",
                     "sessions", "query", "fts", "keyword", "ranked", "briefs", "live", "reply")


def briefing_stages(prefix: str = "", then: str = END
                    ) -> tuple[dict[str, Any], list[dict[str, str]], list[dict[str, Any]]]:
    """The briefing's nodes (named with ``prefix``), edges and routes, from ``prefix +
    "validate"`` to ``then``. Channels: ``BRIEFING_CHANNELS``, the append channel
    ``notes`` and the input ``request``."""
    n = {name: prefix + name for name in ("validate", "session", "project", "status", "terms",
                                          "keyword", "fuse", "briefs", "reply")}
    nodes = {
        n["validate"]: {"type": "checked_briefing"},
        n["session"]: {"type": "session_signals"},
        n["project"]: {"type": "project_signals"},
        n["status"]: {"type": "blocker_status"},
        n["terms"]: {"type": "keyword_query", "words_only": True},
        n["keyword"]: {"type": "keyword_candidates", "compressed_only": True},
        n["fuse"]: {"type": "fused_hits"},
        n["briefs"]: {"type": "guard_evidence"},
        n["reply"]: {"type": "briefing_markdown"},
    }
    edges = chain(n["session"], n["status"]) + chain(n["project"], n["status"]) \
        + chain(n["terms"], n["keyword"], n["fuse"], n["briefs"], n["reply"], then)
    routes = [
        {"from": n["validate"], "condition": "briefing_scope",
         "routes": {"session": n["session"], "project": n["project"],
                    "default": n["reply"]}},
        {"from": n["status"], "condition": "has_query",
         "routes": {"yes": n["terms"], "default": n["reply"]}},
    ]
    return nodes, edges, routes


_brief_nodes, _brief_edges, _brief_routes = briefing_stages("briefing_")
_capture_nodes, _capture_edges, _capture_loops, _capture_failures = pass_stages("capture_")

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "hook",
    "channels": channels("request", "task", *BRIEFING_CHANNELS, *PASS_CHANNELS,
                         append=("notes", ERRORS)),
    "nodes": {"event": {"type": "hook_task"}, **_brief_nodes, **_capture_nodes},
    "edges": chain(START, "event") + _brief_edges + _capture_edges,
    "conditional_edges": [
        {"from": "event", "condition": "hook_task",
         "routes": {"briefing": "briefing_validate", "default": "capture_validate"}},
        *_brief_routes, *_capture_loops,
    ],
    "failure_edges": _capture_failures,
}
