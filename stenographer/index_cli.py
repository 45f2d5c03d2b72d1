"""`stenographer index rebuild`: write the derived keyword index again from the turns.

The SQLite store keeps a Tantivy index beside its file (``store.keyword_index``) for
fast keyword search; the turns in the file are its source. The command runs the
``keyword_index_rebuild`` graph once: every turn's entry is written again, in one
snapshot of the store (servers may keep running: what they store meanwhile is queued
and taken in later). Run it when the contract audit names missing or stale entries, or
after copying or restoring the file without its ``.keywords`` directory; until then
searches use FTS5 and give the same hits.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from stenographer.commands import EXIT_OK, run_graph

__all__ = ["add_index_commands"]


def cmd_rebuild(args: argparse.Namespace) -> int:
    out, trace = run_graph("keyword_index_rebuild", {})
    reply = out["reply"]
    if args.json:
        print(json.dumps({**reply, "run_id": trace["run_id"]}, indent=2))
    else:
        print(reply["text"])
    return EXIT_OK


def add_index_commands(sub: Any, make: Any) -> None:
    """Register `index` and its subcommands; ``make`` is cli._sub."""
    p = make(sub, "index", "the derived keyword index beside a SQLite store",
             lambda a: a.index_fn(a), description=__doc__.split("\n\n")[1])
    isub = p.add_subparsers(dest="index_command", required=True, metavar="SUBCOMMAND")
    q = make(isub, "rebuild", "write the keyword index again from the stored turns",
             cmd_rebuild, json_flag=True)
    q.set_defaults(index_fn=cmd_rebuild, fn=cmd_rebuild)
