"""`stenographer graphrag ...`: build and read the knowledge graph on the host.

Each subcommand runs one graph. ``extract`` runs ``graphrag_extract``, which loops over
batches until no turn is pending (each batch commits with its cursors, so Ctrl-C loses
at most the batch in flight and the next run resumes) and then finds communities when
they are stale; its progress bar advances as each batch is published.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from nodes.evaluate_contracts.requests import (
    CommunityRequest,
    GraphExportRequest,
    GraphExtractRequest,
    GraphQueryRequest,
    GraphResetRequest,
)
from nodes.publish.wording import counted
from stenographer.commands import CliError, run_graph
from stenographer.options import add_options, request_of

__all__ = ["add_graphrag_parser"]

EXIT_OK, EXIT_EMPTY = 0, 1


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def cmd_extract(args: argparse.Namespace) -> int:
    from stenographer.app import open_app
    from stenographer.progress import Progress

    app = open_app()
    read = 0
    try:
        request = request_of(args, GraphExtractRequest)
        with Progress("graphrag extract", total=None, unit="turns") as progress:

            def observe(stage: dict[str, Any], writes: dict[str, Any]) -> None:
                nonlocal read
                published, stats = writes.get("published"), writes.get("stats")
                if published is not None and published["turns"]:
                    read += published["turns"]
                    progress.total = read + published["remaining"]
                    progress.advance(published["turns"])
                elif stats is not None and stats["stale"]:
                    progress.label = "graphrag communities"

            out, trace = app.run("graphrag_extract", request, observe)
    except KeyboardInterrupt:
        print(f"stenographer: interrupted after {counted(read, 'turn')}; the next "
              "`graphrag extract` resumes from there", file=sys.stderr)
        raise
    finally:
        app.close()
    reply = out["reply"]
    detection = reply["detection"]
    result = {"turns_read": reply["turns_read"], "batches": reply["batches"],
              "detection": detection, "run_ids": [trace["run_id"]]}
    if args.json:
        _print_json(result)
    else:
        line = (f"Read {counted(reply['turns_read'], 'new turn')} in "
                f"{counted(reply['batches'], 'batch', 'batches')}.")
        if detection:
            line += (f" Communities: {detection['communities']} over "
                     f"{counted(detection['nodes'], 'entity', 'entities')} "
                     f"(Louvain, seed {detection['seed']}).")
        print(line)
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    out, trace = run_graph("graphrag_stats", {})
    reply = out["reply"]
    if args.json:
        _print_json({**reply["stats"], "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK


def cmd_communities(args: argparse.Namespace) -> int:
    out, trace = run_graph("graphrag_community", request_of(args, CommunityRequest))
    reply = out["reply"]
    if args.community_id is not None:
        if args.json:
            _print_json({**reply["community"], "sentences": reply["sentences"],
                         "run_id": trace["run_id"]})
        else:
            print(reply["text"])
        return EXIT_OK
    if args.json:
        _print_json({"communities": reply["communities"], "total": reply["total"],
                     "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK if reply["communities"] else EXIT_EMPTY


def cmd_export(args: argparse.Namespace) -> int:
    from stenographer.app import open_app

    app = open_app()
    try:
        out, _ = app.run("graphrag_export", request_of(args, GraphExportRequest))
        reply = out["reply"]
        document: str = reply["document"]
    finally:
        app.close()
    if args.output:
        Path(args.output).write_text(document, encoding="utf-8")
        print(f"Wrote {counted(reply['entities'], 'node')} and "
              f"{counted(reply['edges'], 'edge')} to {args.output} ({args.format}).",
              file=sys.stderr)
    else:
        sys.stdout.write(document)
    return EXIT_OK


def cmd_reset(args: argparse.Namespace) -> int:
    if not args.confirm:  # said in the command's words before the store is opened
        raise CliError("`graphrag reset` deletes the derived graph (not the turns); "
                       "repeat with --yes")
    out, _ = run_graph("graphrag_reset", request_of(args, GraphResetRequest))
    print(out["reply"]["text"])
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    out, trace = run_graph("graph_query", request_of(args, GraphQueryRequest))
    reply = out["reply"]
    if args.json:
        _print_json({**{k: v for k, v in reply.items() if k != "text"},
                     "run_id": trace["run_id"]})
    else:
        print(reply["text"])
    return EXIT_OK if reply["entities"] else EXIT_EMPTY


def add_graphrag_parser(sub: Any, make: Any) -> None:
    """Register `graphrag` and its subcommands; ``make`` is cli._sub."""
    p = make(sub, "graphrag", "build and read the knowledge graph of the work (no model)",
             lambda a: a.graphrag_fn(a), description=(
                 "GraphRAG without a language model: entities, co-occurrences and typed "
                 "relations (decides, blocks, fixes, replaces) extracted from the turns, "
                 "with Louvain communities; every node and edge cites its turns."))
    gsub = p.add_subparsers(dest="graphrag_command", required=True, metavar="SUBCOMMAND")

    def add(name: str, help_: str, fn: Any) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = make(gsub, name, help_, fn, json_flag=name != "export")
        q.set_defaults(graphrag_fn=fn, fn=fn)
        return q

    q = add("extract", "read new turns into the graph (resumable), then find communities",
            cmd_extract)
    add_options(q, GraphExtractRequest, names={"session_id": "--session"})
    add("stats", "entities, edges, provenance rows, communities", cmd_stats)
    q = add("communities", "list communities, or show one with --id", cmd_communities)
    add_options(q, CommunityRequest, names={"community_id": "--id"})
    q = add("export", "write the graph as GraphML (Gephi, yEd, Cytoscape) or JSON",
            cmd_export)
    add_options(q, GraphExportRequest)
    q.add_argument("--output", "-o", help="file to write (default: stdout)")
    q = add("query", "entities, relations and turns around a question "
                     "(as stenographer_graph_query)", cmd_query)
    add_options(q, GraphQueryRequest, positional=("query",),
                either=("session_id", "cross_session"),
                names={"session_id": "--session", "cross_session": "--all"},
                helps={"session_id": "use only links supported by turns of this session",
                       "cross_session": "every session"})
    q = add("reset", "delete the derived graph (the turns stay)", cmd_reset)
    add_options(q, GraphResetRequest, names={"confirm": "--yes"}, helps={"confirm": "confirm"})
