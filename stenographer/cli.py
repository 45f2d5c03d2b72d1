"""The `stenographer` command for people.

Every read command runs the same named graph as the MCP tool and prints text, or JSON
with ``--json``. Exit codes (also in ``--help``): 0 success, 1 nothing found, 2 bad
input, unknown session or run id, or a store that cannot be used.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from nodes.evaluate_contracts.requests import (
    AuditRequest,
    ForgetRequest,
    GuardRequest,
    ListingRequest,
    NotesRequest,
    Request,
    SearchRequest,
    TraceRequest,
)
from stenographer import __version__
from stenographer.commands import (
    EPILOG,
    EXIT_EMPTY,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CliError,
    print_json,
    run_graph,
    stdout_tty,
)
from stenographer.index_cli import add_index_commands
from stenographer.options import add_options, request_of
from stenographer.progress import Progress
from stenographer.render import run_line, waterfall
from stenographer.serve_cli import PORT

__all__ = ["EXIT_EMPTY", "EXIT_ERROR", "EXIT_OK", "build_parser", "main"]

def cmd_inspect(args: argparse.Namespace) -> int:
    from stenographer.settings import Settings

    settings = Settings.from_env()
    try:
        from stenographer.inspector import serve_inspector
    except ModuleNotFoundError as ex:
        if ex.name != "stenographer.inspector":
            raise
        raise CliError("the inspector is not part of this build") from None
    try:
        serve_inspector(settings, host=args.host, port=args.port, open_browser=args.open)
    except ValueError as ex:  # a bind address it refuses (loopback only)
        raise CliError(str(ex)) from None
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from stenographer.demo import run_demo

    return run_demo(args.dir)


def cmd_search(args: argparse.Namespace) -> int:
    out, trace = run_graph("search", request_of(args, SearchRequest))
    reply = out["reply"]
    if args.json:
        print_json({**{k: v for k, v in reply.items() if k != "text"},
                    "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK if reply["hits"] else EXIT_EMPTY


def _session_markdown(graph: str, model: type[Request]) -> Callable[[argparse.Namespace], int]:
    """A command that prints a session's Markdown from ``graph`` (the running notes, the
    compaction briefing): exit 1 when the session has nothing recorded."""
    def command(args: argparse.Namespace) -> int:
        out, trace = run_graph(graph, request_of(args, model))
        reply = out["reply"]
        if args.json:
            print_json({"session_id": args.session_id, **reply, "run_id": trace["run_id"]})
        else:
            print(reply["markdown"])
        return EXIT_OK if reply["found"] else EXIT_EMPTY
    return command


cmd_brief = _session_markdown("notes", NotesRequest)
cmd_guard = _session_markdown("guard", GuardRequest)


def cmd_sessions(args: argparse.Namespace) -> int:
    out, trace = run_graph("sessions", request_of(args, ListingRequest))
    reply = out["reply"]
    if args.json:
        print_json({"sessions": reply["sessions"], "total": reply["total"],
                    "offset": reply["offset"], "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK if reply["sessions"] else EXIT_EMPTY


def cmd_stats(args: argparse.Namespace) -> int:
    out, trace = run_graph("stats", {})
    reply = out["reply"]
    if args.json:
        print_json({**reply["stats"], "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    words = list(args.words)
    if words[:1] == ["list"]:
        words = words[1:]
        if words:
            raise CliError("`trace list` takes no run id; use `trace show RUN_ID`")
    elif words[:1] == ["show"]:
        words = words[1:]
        if len(words) != 1:
            raise CliError("`trace show` needs one RUN_ID (list them with `trace list`)")
    if len(words) > 1:
        raise CliError("give at most one RUN_ID: `trace [list | show RUN_ID | RUN_ID]`")
    request = request_of(args, TraceRequest)
    out, _ = run_graph("trace", {**request, "run_id": words[0] if words else None})
    reply = out["reply"]
    if words:
        if args.json:
            print_json(reply["trace"])
        else:
            print(waterfall(reply["trace"], color=stdout_tty()))
        return EXIT_OK
    if args.json:
        print_json({"runs": reply["runs"]})
    else:
        color = stdout_tty()
        for run in reply["runs"]:
            print(run_line(run, color))
    return EXIT_OK if reply["runs"] else EXIT_EMPTY


def cmd_status(args: argparse.Namespace) -> int:
    reply = run_graph("status", {})[0]["reply"]
    if args.json:
        print_json(reply["status"])
    else:
        print(reply["text"])
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    out, trace = run_graph("contract_audit", request_of(args, AuditRequest))
    report = out["reply"]
    if args.json:
        print_json({**report, "run_id": trace["run_id"]})
    else:
        print(report["text"])
    return EXIT_OK if report["passed"] else EXIT_EMPTY


def cmd_forget(args: argparse.Namespace) -> int:
    text = args.text
    if args.text_stdin:
        if text is not None:
            raise CliError("give --text or --text-stdin, not both")
        text = sys.stdin.read().rstrip("\r\n")  # the final newline of `echo`/a file
    out, trace = run_graph("forget", {**request_of(args, ForgetRequest), "text": text})
    reply = out["reply"]
    if args.json:
        print_json({**reply, "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK if reply["count"] else EXIT_EMPTY


def cmd_config(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stenographer.client_config import client_config, launch_command, paste_hint
    from stenographer.settings import Settings

    data_dir = Path(args.dir).expanduser().absolute() if args.dir else Settings.from_env().data_dir
    if args.hooks:
        from stenographer.client_config import HOOKS_HINT, hook_command, hooks_config

        if args.client != "claude-code":
            raise CliError("--hooks prints Claude Code's hooks block: use it with claude-code")
        print_json(hooks_config(hook_command(data_dir)))
        print(HOOKS_HINT, file=sys.stderr)
        return EXIT_OK
    launch = launch_command(data_dir)
    print_json(client_config(args.client, launch, args.name))
    print(paste_hint(args.client, launch, args.name), file=sys.stderr)
    return EXIT_OK


def cmd_graphs(args: argparse.Namespace) -> int:
    from stenographer.operations import graph_table

    reply, _trace = graph_table()
    if args.json:
        print_json({"graphs": reply["graphs"]})
    else:
        print(reply["text"])
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from stenographer.doctor import as_json, check_count, report, run_doctor

    with Progress("stenographer doctor", total=check_count()) as progress:
        checks, _ = run_doctor(on_check=lambda c: progress.advance(label=f"checked {c.name}"))
    if args.json:
        print_json(as_json(checks))
    else:
        print(report(checks, color=stdout_tty()))
    return EXIT_OK if all(c.ok for c in checks) else EXIT_ERROR


def _sub(sub: Any, name: str, help_: str, fn: Any, *, json_flag: bool = False,
         description: str | None = None) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name, help=help_, description=description or help_, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    if json_flag:
        p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.set_defaults(fn=fn)
    return p


_PORT = PORT


def build_parser() -> argparse.ArgumentParser:
    from stenographer.client_config import CLIENTS, DEFAULT_NAME

    parser = argparse.ArgumentParser(
        prog="stenographer", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Omega Stenographer: the memory of an AI agent's work (MCP server + tools). "
                    "Run `stenographer COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from stenographer.serve_cli import add_serve_command

    add_serve_command(sub, _sub)

    p = _sub(sub, "inspect", "open the read-only browser inspector", cmd_inspect)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_PORT, default=8766, help="port (default 8766)")
    p.add_argument("--open", action="store_true", help="open it in the default browser")

    p = _sub(sub, "demo", "run an end-to-end demo through a real MCP client", cmd_demo)
    p.add_argument("--dir", help="data directory to use (default: a fresh temporary one)")

    p = _sub(sub, "search", "search recorded turns (as stenographer_query_history)",
             cmd_search, json_flag=True)
    add_options(p, SearchRequest, positional=("query",), either=("session_id", "cross_session"),
                names={"session_id": "--session", "cross_session": "--all"},
                helps={"query": "a plain question or FTS5 syntax",
                       "session_id": "search this session",
                       "cross_session": "search every session",
                       "flag": "only turns with this NAFE flag (NAFE: any of the four)"})

    p = _sub(sub, "brief", "running notes of a session (as stenographer_get_brief)",
             cmd_brief, json_flag=True)
    add_options(p, NotesRequest, positional=("session_id",), metavars={"session_id": "session"},
                helps={"session_id": "the session (case-sensitive)"})

    p = _sub(sub, "guard", "compaction briefing (as stenographer_compact_guard)", cmd_guard,
             json_flag=True)
    add_options(p, GuardRequest, positional=("session_id",), metavars={"session_id": "session"},
                helps={"session_id": "the session (case-sensitive)"})

    p = _sub(sub, "sessions", "list sessions: turns, briefs, milestones, last activity",
             cmd_sessions, json_flag=True)
    add_options(p, ListingRequest, leave_out=("graph", "all_graphs"),
                helps={"limit": "sessions per page (1-200, default 50)"})

    _sub(sub, "stats", "store counts, size, bytes per table and schema version", cmd_stats,
         json_flag=True)

    p = _sub(sub, "trace", "list recent graph runs, or show one run's stage trace", cmd_trace,
             json_flag=True, description=(
                 "`trace` or `trace list`: recent graph runs. `trace RUN_ID` or `trace show "
                 "RUN_ID`: one run's stage trace as a waterfall (errors in red on a "
                 "terminal)."))
    p.add_argument("words", nargs="*", metavar="list | show RUN_ID | RUN_ID")
    add_options(p, TraceRequest, leave_out=("run_id",))

    _sub(sub, "status", "store counts, capture and delivery status", cmd_status,
         json_flag=True)

    p = _sub(sub, "audit", "check the store's contracts (as stenographer_audit)", cmd_audit,
             json_flag=True, description=(
                 "Check the store's contracts: content hashes, the provenance hash chain, "
                 "brief sources, compression, the keyword and vector indexes, milestones, "
                 "trace retention. Reads the store in bounded pages; read-only. Exit code "
                 "0: every contract holds; 1: violations (listed with their ids); 2: the "
                 "audit could not run."))
    add_options(p, AuditRequest, names={"session_id": "--session"})

    p = _sub(sub, "forget", "delete turns for good (as stenographer_forget)", cmd_forget,
             json_flag=True, description=(
                 "Delete turns for good, with tombstones (ids, hashes, time, reason; never "
                 "the content). Every given filter must match. The briefs that cited them "
                 "are rebuilt from their remaining sources and the file is rewritten so the "
                 "text is not recoverable. Requires --yes. Exit code 0: turns forgotten; "
                 "1: nothing matched; 2: bad input or an unknown session."))
    add_options(p, ForgetRequest, names={"exchange_ids": "--id", "session_id": "--session",
                                         "confirm": "--yes"},
                metavars={"exchange_ids": "EXCHANGE_ID"}, helps={
                    "exchange_ids": "forget this turn (repeatable)",
                    "text": "turns containing this literal text (case-sensitive); prefer "
                            "--text-stdin for a secret (shell history, ps)",
                    "vacuum": "skip rewriting the file (faster; freed pages are still zeroed)",
                    "confirm": "confirm: this cannot be undone"})
    p.add_argument("--text-stdin", action="store_true",
                   help="read the literal text from standard input")

    p = _sub(sub, "config", "print a ready-to-paste MCP configuration for a host", cmd_config,
             description=(
                 "Print the MCP configuration of this installation for CLIENT as JSON on "
                 "stdout (absolute path of the omega-stenographer-mcp script and "
                 "OMEGA_STENOGRAPHER_DIR filled in); where to paste it goes to stderr."))
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("--name", default=DEFAULT_NAME, help=f"server name (default {DEFAULT_NAME})")
    p.add_argument("--hooks", action="store_true",
                   help="claude-code: print the hooks block for settings.json instead "
                        "(PreCompact, SessionStart, Stop)")
    p.add_argument("--dir", help="data directory (default: OMEGA_STENOGRAPHER_DIR or "
                                 "~/.omega-stenographer)")

    from stenographer.capture_cli import add_capture_commands

    add_capture_commands(sub, _sub)

    from stenographer.sync_cli import add_sync_commands

    add_sync_commands(sub, _sub)

    from stenographer.bus_cli import add_bus_commands

    add_bus_commands(sub, _sub)

    from stenographer.migrate_cli import add_migrate_command

    add_migrate_command(sub, _sub)

    _sub(sub, "doctor", "check Python, SQLite, sqlite-vec, the data directory and the store "
         "(with STENO_DATABASE_URL: the PostgreSQL connection, version, pgvector, schema)",
         cmd_doctor, json_flag=True)

    from stenographer.graphrag_cli import add_graphrag_parser

    add_graphrag_parser(sub, _sub)
    add_index_commands(sub, _sub)

    _sub(sub, "graphs", "list every graph: its stages, its edges and the tools and commands "
         "that run it", cmd_graphs, json_flag=True)
    return parser


def _fail(args: argparse.Namespace, code: str, message: str) -> int:
    print(f"stenographer: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        print_json({"error": {"code": code, "message": message}})
    return EXIT_ERROR


def run(args: argparse.Namespace) -> int:
    """Run a parsed command; every failure becomes a message and an exit code."""
    import apsw

    # Imported here, not at the top: the stdio server would start ~0.1 s later.
    from stenographer.settings import SettingsError
    from store.errors import StenoError

    try:
        return int(args.fn(args))
    except (StenoError, CliError) as ex:
        return _fail(args, ex.code, str(ex))
    except SettingsError as ex:
        return _fail(args, "steno.settings", str(ex))
    except apsw.Error as ex:
        return _fail(args, "steno.store", f"the store cannot be used: {ex}")
    except OSError as ex:
        if isinstance(ex, BrokenPipeError):
            raise
        return _fail(args, "steno.os", f"{ex.strerror or ex}"
                     + (f": {ex.filename}" if ex.filename else ""))


def main(argv: Sequence[str] | None = None,
         parser: argparse.ArgumentParser | None = None) -> None:
    """Parse ``argv`` (with ``parser``, default the `stenographer` command's), run it, exit."""
    words = list(sys.argv[1:] if argv is None else argv)
    if parser is None and words[:1] == ["hook"]:  # a host waits: nothing else is set up
        from stenographer.capture_cli import hook_exit, hook_main

        code = hook_main(words[1:])
        if argv is None:  # this process is the hook: leave without the interpreter's teardown
            hook_exit(code)
        sys.exit(code)
    if parser is None and words[:1] == ["serve"]:  # a host waits: only the server's options
        from stenographer.serve_cli import pause_gc, serve_command_parser

        pause_gc()  # resumed once the server is ready (stenographer.serve_cli)
        args, unknown = serve_command_parser().parse_known_args(words[1:])
        if unknown:  # refused as the whole command line refuses them
            args = build_parser().parse_args(argv)
    else:
        args = (parser or build_parser()).parse_args(argv)
    try:
        code = run(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: not an error of ours. Point stdout at
        # devnull so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    sys.exit(code)
