"""The `stenographer` command for people: serve, demo, search, brief, guard, trace.

Every read command runs the same named graph as the MCP tool and can print JSON.
Exit codes: 0 success, 1 nothing found, 2 bad input or a store that cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from stenographer import __version__
from stenographer.settings import SettingsError

__all__ = ["main"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _waterfall(trace: dict[str, Any]) -> str:
    """A stage trace as a text waterfall: one bar per node, scaled to the run."""
    total = max(float(trace["duration_ms"]), 1e-6)
    lines = [f"run {trace['run_id']}  graph {trace['graph']}  {trace['status']}  "
             f"{trace['duration_ms']:.3f} ms"]
    offset = 0.0
    for stage in trace["stages"]:
        start = int(40 * offset / total)
        width = max(1, int(40 * stage["duration_ms"] / total))
        bar = " " * start + "█" * width
        mark = "  ERROR " + stage["error"] if stage.get("error") else ""
        lines.append(f"  {stage['node']:<12} {stage['duration_ms']:>9.3f} ms |{bar:<41}|{mark}")
        for channel, summary in stage.get("writes", {}).items():
            lines.append(f"  {'':<12} {'':>12}  {channel} = {summary}")
        offset += stage["duration_ms"]
    return "\n".join(lines)


def _run(graph: str, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from stenographer.app import open_app

    app = open_app()
    try:
        return app.run(graph, request)
    finally:
        app.close()


def cmd_serve(args: argparse.Namespace) -> int:
    from stenographer.server import mcp

    mcp.run()
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from stenographer.demo import run_demo

    return run_demo(args.dir)


def cmd_search(args: argparse.Namespace) -> int:
    out, trace = _run("search", {
        "query": args.query, "session_id": args.session, "cross_session": args.all,
        "limit": args.limit, "mode": args.mode, "role": args.role, "since": args.since,
        "until": args.until, "cursor": args.cursor})
    if args.json:
        _print_json({"hits": out["hits"], "total": out["total"],
                     "next_cursor": out["next_cursor"], "notes": out["notes"],
                     "run_id": trace["run_id"]})
    else:
        print(out["text"])
    return EXIT_OK if out["hits"] else EXIT_EMPTY


def cmd_brief(args: argparse.Namespace) -> int:
    out, trace = _run("notes", {"session_id": args.session, "max_chars": args.max_chars})
    if args.json:
        _print_json({"markdown": out["markdown"], "run_id": trace["run_id"]})
    else:
        print(out["markdown"])
    return EXIT_OK if out["session_row"] is not None else EXIT_EMPTY


def cmd_guard(args: argparse.Namespace) -> int:
    out, trace = _run("guard", {"session_id": args.session, "query": args.query,
                                "top_k": args.top_k, "max_chars": args.max_chars})
    if args.json:
        _print_json({"markdown": out["markdown"], "brief_ids": [b["id"] for b in out["briefs"]],
                     "run_id": trace["run_id"]})
    else:
        print(out["markdown"])
    return EXIT_OK if out["query"]["session_row"] is not None else EXIT_EMPTY


def cmd_trace(args: argparse.Namespace) -> int:
    if args.run_id:
        out, _ = _run("trace", {"run_id": args.run_id})
        if args.json:
            _print_json(out["trace"])
        else:
            print(_waterfall(out["trace"]))
        return EXIT_OK
    out, _ = _run("runs", {"limit": args.limit, "graph": args.graph})
    if args.json:
        _print_json(out["runs"])
    else:
        for r in out["runs"]:
            print(f"{r['run_id']}  {r['graph']:<10} {r['status']:<10} {r['duration_ms']:>9.3f} ms")
    return EXIT_OK if out["runs"] else EXIT_EMPTY


def cmd_status(args: argparse.Namespace) -> int:
    out, _ = _run("status", {})
    if args.json:
        _print_json(out["status"])
    else:
        print(out["text"])
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stenographer",
        description="Omega Stenographer: the memory of an AI agent's work (MCP server + tools).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the MCP server on stdio (what MCP hosts launch)")
    p.set_defaults(fn=cmd_serve)

    p = sub.add_parser("demo", help="run an end-to-end demo through a real MCP client")
    p.add_argument("--dir", help="data directory to use (default: a fresh temporary one)")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("search", help="search recorded turns (as stenographer_query_history)")
    p.add_argument("query")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--session", help="search this session")
    scope.add_argument("--all", action="store_true", help="search every session")
    p.add_argument("--limit", type=int, default=10, help="hits per page (1-50)")
    p.add_argument("--mode", choices=("hybrid", "keyword", "semantic"), default="hybrid")
    p.add_argument("--role", choices=("any", "user", "assistant", "system", "tool"),
                   default="any")
    p.add_argument("--since", help="ISO 8601 time")
    p.add_argument("--until", help="ISO 8601 time")
    p.add_argument("--cursor", help="next_cursor of the previous page")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_search)

    p = sub.add_parser("brief", help="running notes of a session (as stenographer_get_brief)")
    p.add_argument("session")
    p.add_argument("--max-chars", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_brief)

    p = sub.add_parser("guard", help="compaction briefing (as stenographer_compact_guard)")
    p.add_argument("session")
    p.add_argument("--query")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--max-chars", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_guard)

    p = sub.add_parser("trace", help="list recent graph runs, or show one run's stage trace")
    p.add_argument("run_id", nargs="?")
    p.add_argument("--graph", help="only runs of this graph")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_trace)

    p = sub.add_parser("status", help="store counts, capture and delivery status")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(fn=cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from store.errors import StenoError

    try:
        code = int(args.fn(args))
    except (StenoError, SettingsError) as ex:
        print(f"stenographer: {ex}", file=sys.stderr)
        code = EXIT_ERROR
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
