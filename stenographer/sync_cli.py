"""The `stenographer export`, `import` and `sync push|pull|status` commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from nodes.evaluate_contracts.requests import ExportRequest, ImportRequest, PeerRequest
from stenographer.commands import run_graph
from stenographer.options import add_options, request_of
from stenographer.settings import Settings

__all__ = ["add_sync_commands"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2

SYNC_HELP = """\
Push and pull between running instances over HTTP. The peer is another
`stenographer serve --http`; the bearer token sent is STENO_SYNC_TOKEN (or the file
STENO_SYNC_TOKEN_FILE), i.e. the peer's STENO_HTTP_TOKEN. Each command sends or fetches
batches of STENO_SYNC_BATCH turns (--batch) after the peer's cursor, so an interrupted
sync resumes where it stopped; transient failures are retried STENO_SYNC_RETRIES times
with backoff. Applying is idempotent: nothing is ever stored twice. Exit code 0: in
sync; 2: the peer could not be reached or refused, or bad input. A server with
STENO_SYNC_PEER set also pushes in the background every STENO_SYNC_INTERVAL seconds."""


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _graph(graph: str, request: dict[str, Any]) -> dict[str, Any]:
    out, _ = run_graph(graph, request)
    return dict(out["reply"])


def cmd_export(args: argparse.Namespace) -> int:
    reply = _graph("sync_export", request_of(args, ExportRequest))
    _print(reply) if args.json else print(reply["text"])
    return EXIT_OK if reply["turns"] or reply["tombstones"] else EXIT_EMPTY


def cmd_import(args: argparse.Namespace) -> int:
    reply = _graph("sync_import", request_of(args, ImportRequest))
    _print(reply) if args.json else print(reply["text"])
    return EXIT_OK


def _sync(args: argparse.Namespace, direction: str) -> int:
    from stenographer.app import open_app
    from stenographer.sync import pull, push

    request = request_of(args, PeerRequest)
    app = open_app(Settings.from_env())
    try:
        run = push if direction == "push" else pull
        outcome = run(app, request["url"], batch=request["batch"])
    finally:
        app.close()
    if args.json:
        _print(outcome.as_dict())
    else:
        for line in outcome.lines:
            print(line)
        print(outcome.text, file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_ERROR


def cmd_sync_push(args: argparse.Namespace) -> int:
    return _sync(args, "push")


def cmd_sync_pull(args: argparse.Namespace) -> int:
    return _sync(args, "pull")


def cmd_sync_status(args: argparse.Namespace) -> int:
    out, _ = run_graph("status", {})
    delivery = out["reply"]["status"]["delivery"]
    if args.json:
        _print(delivery)
        return EXIT_OK
    if not delivery["peers"]:
        print("No sync peers yet (stenographer sync push --to URL | pull --from URL).")
        return EXIT_OK
    for p in delivery["peers"]:
        counted = (f"{p['delivered']:,} delivered, {p['pending']:,} pending"
                   if p["direction"] == "outbox" else f"{p['received']:,} received")
        print(f"{p['direction']:6} {p['peer']}: through #{p['position']}, {counted}, "
              f"{p['duplicates']:,} already there; last success {p['last_success_at']}"
              + (f"; last error {p['last_error_at']}: {p['last_error']}"
                 if p["last_error"] else ""))
    return EXIT_OK


def add_sync_commands(sub: Any, add: Any) -> None:
    """Register `export`, `import` and `sync` (``add`` is cli._sub)."""
    p = add(sub, "export", "write the store (or one session) to a zstd bundle file",
            cmd_export, json_flag=True, description=(
                "Write every turn (or one session's) with its hashes to PATH: a zstd "
                "bundle of JSON lines with a manifest (schema version, counts, per-session "
                "chain heads, a SHA-256 checksum). Streams with bounded memory from one "
                "consistent snapshot. Exit code 0: written; 1: nothing to export."))
    add_options(p, ExportRequest, positional=("path",), names={"session_id": "--session"},
                leave_out=("after", "limit"), helps={
                    "path": "the bundle file to write (must not exist)",
                    "overwrite": "replace PATH if it exists"})

    p = add(sub, "import", "verify a bundle, then add the turns this store lacks",
            cmd_import, json_flag=True, description=(
                "Verify the whole bundle first (zstd checksum, format and version, every "
                "content hash and chain hash, the manifest's counts, heads and checksum); "
                "a damaged, truncated, foreign or wrong-version bundle is refused (exit 2) "
                "and nothing is applied. Then add the turns this store lacks (a turn is "
                "known by its origin hash or source key: importing twice adds nothing), "
                "merged into sessions of the same name, and compress as ingest does."))
    add_options(p, ImportRequest, positional=("path",), leave_out=("peer",))

    p = add(sub, "sync", "push to / pull from another running instance over HTTP",
            cmd_sync_status, description=SYNC_HELP)
    nested = p.add_subparsers(dest="sync_command", required=True, metavar="push|pull|status")
    for name, help_, fn, flag in (
            ("push", "send the turns the peer lacks", cmd_sync_push, "--to"),
            ("pull", "fetch the turns this store lacks", cmd_sync_pull, "--from")):
        q = nested.add_parser(name, help=help_, description=f"{help_}.\n\n{SYNC_HELP}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
        add_options(q, PeerRequest, names={"url": flag}, metavars={"url": "URL"})
        q.add_argument("--json", action="store_true", help="print JSON on stdout")
        q.set_defaults(fn=fn)
    q = nested.add_parser("status", help="outbox and inbox per peer: cursor, pending, "
                          "delivered, last success and error")
    q.add_argument("--json", action="store_true", help="print JSON on stdout")
    q.set_defaults(fn=cmd_sync_status)
