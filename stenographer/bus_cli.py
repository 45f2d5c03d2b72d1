"""The `stenographer bus publish` command: drain the bus outbox once."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from nodes.evaluate_contracts.requests import BusPublishRequest
from stenographer.options import add_options, request_of
from stenographer.settings import Settings

__all__ = ["add_bus_commands"]

EXIT_OK, EXIT_ERROR = 0, 2

BUS_HELP = """\
Publish the turns not yet on the coordination bus
($VERITAS_SHARED_DIR/coordination.sqlite) as STENO_EXCHANGE events, in batches of
STENO_BUS_BATCH (--batch) after the bus outbox's cursor. Each event carries a key
unique across stores (the store's random id, the turn's id and chain hash) and is
inserted only if that key is not on the bus yet, so running this next to server
processes (which publish in the background every STENO_BUS_INTERVAL seconds) never
publishes a turn twice. Exit code 0: the bus has every turn; 2: the bus is off,
missing, locked or corrupt (the turns wait in the outbox: run it again later)."""


def cmd_bus_publish(args: argparse.Namespace) -> int:
    from stenographer.app import open_app
    from stenographer.bus import publish

    request = request_of(args, BusPublishRequest)
    app = open_app(Settings.from_env())
    try:
        outcome = publish(app, batch=request["batch"])
    finally:
        app.close()
    if args.json:
        print(json.dumps(outcome.as_dict(), indent=2))
    else:
        for line in outcome.lines:
            print(line)
        print(outcome.text, file=sys.stdout if outcome.ok else sys.stderr)
    return EXIT_OK if outcome.ok else EXIT_ERROR


def add_bus_commands(sub: Any, add: Any) -> None:
    """Register `bus publish` (``add`` is cli._sub)."""
    p = add(sub, "bus", "the coordination bus: publish turns as STENO_EXCHANGE events",
            None, description=BUS_HELP)
    nested = p.add_subparsers(dest="bus_command", required=True, metavar="publish")
    q = nested.add_parser("publish", help="publish the turns the bus lacks, then stop",
                          description=BUS_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(q, BusPublishRequest)
    q.add_argument("--json", action="store_true", help="print JSON on stdout")
    q.set_defaults(fn=cmd_bus_publish)
