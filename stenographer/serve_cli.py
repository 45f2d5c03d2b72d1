"""Starting the MCP server, from one set of options wherever it is started.

``omega-stenographer-mcp [OPTIONS]``, ``python -m stenographer [OPTIONS]`` and
``stenographer serve [OPTIONS]`` parse the same options and run ``cmd_serve``: no
option serves stdio (what MCP hosts launch); ``--http`` or ``--sse`` (the original
server's spelling) serves Streamable HTTP at ``/mcp`` and legacy SSE at ``/sse`` on
loopback by default, with the same checks and bearer token whichever name started it
(``--no-token`` serves HTTP without one, on loopback only).
Anything else is refused at once (exit 2) with a usage line.

Nothing here imports the MCP SDK or the server before the options are read, and
``stenographer serve`` is parsed without building the other commands' parsers: a host
waits for the first reply. While the stdio server starts (from its entry point on),
the cyclic garbage collector is paused (``pause_gc``): start-up creates a few hundred
thousand long-lived objects (the SDK's protocol models, the tools' schemas, numpy, the
store) and each full collection on the way would scan all of them again, about 0.1 s
each. Once the application is open, ``resume_gc`` moves what start-up created out of
the collector's view (``gc.freeze``, so later collections during tool calls do not scan
it either) and turns collection back on; an HTTP server resumes it before it serves.
"""

from __future__ import annotations

import argparse
import gc
import threading
from collections.abc import Sequence
from typing import Any

from stenographer import __version__
from stenographer.argtypes import ranged

__all__ = ["PORT", "add_serve_command", "build_server_parser", "cmd_serve", "main",
           "pause_gc", "resume_gc", "serve_command_parser"]

DESCRIPTION = (
    "Run the Omega Stenographer MCP server. Without options: stdio, what MCP hosts launch "
    "(it exits at end of input, once every request read is answered). With --http (or "
    "--sse): Streamable HTTP at /mcp plus legacy SSE at /sse, on 127.0.0.1 by default, "
    "requiring a bearer token: STENO_HTTP_TOKEN or STENO_HTTP_TOKEN_FILE (never from the "
    "command line; any non-loopback --host requires it), else one generated on the first "
    "start into the owner-only file http_token in the data directory (its path and use "
    "are printed on stderr).")

PORT = ranged(int, 0, 65535, "", "; 0 picks a free port")  # an argparse type


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", "--sse", dest="http", action="store_true",
                        help="serve Streamable HTTP and SSE instead of stdio")
    parser.add_argument("--host", help="address to bind with --http (default 127.0.0.1)")
    parser.add_argument("--port", type=PORT, help="port with --http (default 8765)")
    parser.add_argument("--no-token", action="store_true",
                        help="with --http on a loopback address: require no token (every "
                             "local user can then call every tool)")
    parser.set_defaults(fn=cmd_serve)


SERVE_HELP = "run the MCP server: stdio (what MCP hosts launch) or --http"


def add_serve_command(sub: Any, make: Any) -> None:
    """``stenographer serve`` (``make`` is the command line's sub-parser factory)."""
    add_serve_options(make(sub, "serve", SERVE_HELP, cmd_serve, description=DESCRIPTION))


def serve_command_parser() -> argparse.ArgumentParser:
    """The parser of ``stenographer serve`` alone: the same prog, help and options as
    the sub-parser that ``stenographer --help`` lists, without the other commands'."""
    from stenographer.commands import EPILOG

    parser = argparse.ArgumentParser(
        prog="stenographer serve", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_serve_options(parser)
    parser.set_defaults(command="serve")
    return parser


def build_server_parser() -> argparse.ArgumentParser:
    """The parser of ``omega-stenographer-mcp`` and of ``python -m stenographer OPTIONS``."""
    parser = argparse.ArgumentParser(
        prog="omega-stenographer-mcp", description=DESCRIPTION,
        epilog="Commands for people (search, brief, audit, ...): `stenographer --help`, or "
               "`python -m stenographer COMMAND`.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_serve_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Console script `omega-stenographer-mcp`: the stdio server that MCP hosts launch, or
    with `--http`/`--sse` the HTTP server (`omega-stenographer-mcp --help`)."""
    pause_gc()  # a process that serves: resumed in cmd_serve or once the app is open
    from stenographer.cli import main as cli_main

    cli_main(argv, build_server_parser())


_gc_lock = threading.Lock()
_gc_paused = False


def pause_gc() -> None:
    """Pause cyclic garbage collection until ``resume_gc`` (if it is on). For a process
    that is about to serve: its entry point, or ``cmd_serve``."""
    global _gc_paused
    with _gc_lock:
        if gc.isenabled():
            gc.disable()
            _gc_paused = True


def resume_gc() -> None:
    """After ``pause_gc``: keep what exists now out of later collections and collect
    again. Does nothing when collection was not paused here."""
    global _gc_paused
    with _gc_lock:
        if _gc_paused:
            _gc_paused = False
            gc.freeze()
            gc.enable()


def cmd_serve(args: argparse.Namespace) -> int:
    from stenographer.commands import EXIT_OK, CliError
    from stenographer.settings import Settings

    # An invalid setting stops every way of starting the server here (exit 2, naming
    # it and what is valid), before it serves: a host shows that in its log, where
    # tool calls that all fail would blame the store.
    settings = Settings.from_env()
    if not args.http:
        if args.host is not None or args.port is not None:
            raise CliError("--host and --port need --http or --sse (stdio has no address)")
        if args.no_token:
            raise CliError("--no-token needs --http or --sse (stdio has no token)")
        pause_gc()  # if its entry point did not: resumed once the application is open
        from stenographer.server import serve_stdio

        serve_stdio()
        return EXIT_OK
    resume_gc()  # an HTTP server does not wait for its first caller: collect as usual
    try:
        from stenographer.http import serve_http
    except ModuleNotFoundError as ex:
        if ex.name != "stenographer.http":
            raise
        raise CliError("the HTTP transport is not part of this build") from None
    address: dict[str, Any] = {}  # unset options keep serve_http's own defaults
    if args.host is not None:
        address["host"] = args.host
    if args.port is not None:
        address["port"] = args.port
    serve_http(settings, no_token=args.no_token, **address)
    return EXIT_OK
