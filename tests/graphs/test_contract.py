"""The typed node contract, checked on every graph definition against the node
functions it names (their signatures and declared writes), without running anything.

A definition fails when it declares a channel nothing provides (no node writes it, no
input, subgraph or failure edge fills it); a node or route condition fails when it
reads a channel that no stage able to run before it writes and no input provides; a
node fails when it declares a write to a channel the definition does not have, or
when it reads a channel as one type and a node of the same graph writes another (both
named, neither ``Any``; a reader may add ``| None``).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Iterator, Mapping
from typing import (
    Any,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import pytest

from graphs.definition import END, START
from graphs.registry import CONDITIONS, NODE_PACKAGE, all_definitions, node_modules
from graphs.runner import Reads
from nodes.context import NODES, NodeFn

INPUTS = frozenset({"request"})  # what the tools and commands give every graph
# graphs also run with other inputs: compress on its own takes the session's row
OTHER_INPUTS = {"compress": frozenset({"session_row"})}


def node_fn(kind: str, extra: Mapping[str, NodeFn] | None = None) -> NodeFn:
    """The node function of a type: ``extra``'s (a test's own nodes), else a module's."""
    if extra and kind in extra:
        return extra[kind]
    importlib.import_module(node_modules()[kind])
    return NODES[kind]


def writes_of(fn: NodeFn) -> frozenset[str]:
    """The channels a node declares it writes: the keys of its TypedDict return."""
    returned = get_type_hints(fn)["return"]
    assert is_typeddict(returned), f"{fn.__name__} returns {returned}, not a TypedDict"
    return frozenset(returned.__annotations__)


def successors(definition: Mapping[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for edge in definition.get("edges", []):
        out.setdefault(edge["from"], set()).add(edge["to"])
    for edge in definition.get("conditional_edges", []):
        out.setdefault(edge["from"], set()).update(edge["routes"].values())
    for edge in definition.get("failure_edges", []):
        out.setdefault(edge["from"], set()).add(edge["to"])
    return out


def before(definition: Mapping[str, Any], node: str) -> set[str]:
    """The stages that may run before ``node`` (itself too, in a loop)."""
    nexts = successors(definition)
    reaching: dict[str, set[str]] = {}
    for start in [START, *definition["nodes"]]:
        seen, stack = set(), [start]
        while stack:
            for nxt in nexts.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        reaching[start] = seen
    return {s for s, reached in reaching.items() if node in reached and s != START}


def without_none(kind: Any) -> Any:
    if get_origin(kind) in (Union, types.UnionType):
        rest = tuple(a for a in get_args(kind) if a is not type(None))
        return rest[0] if len(rest) == 1 else rest
    return kind


class Stage:
    """What one stage of a definition reads and writes."""

    def __init__(self, definition: Mapping[str, Any], name: str,
                 extra: Mapping[str, NodeFn] | None = None) -> None:
        spec = definition["nodes"][name]
        channels = set(definition["channels"])
        self.name = name
        self.types: dict[str, Any] = {}  # channel → the type written, when named
        self.reading: dict[str, Any] = {}  # channel → the type read, when named
        if spec["type"] == "subgraph":
            self.reads = frozenset(spec.get("input_map", {}))
            self.optional: frozenset[str] = frozenset()
            self.writes = frozenset(spec.get("output_map", {}).values())
            self.declared = self.writes
        else:
            fn = node_fn(spec["type"], extra)
            reads = Reads(fn)
            self.optional = reads.optional
            self.reads = frozenset(c for c in reads.channels
                                   if c not in reads.optional or c in channels)
            self.declared = writes_of(fn)
            self.writes = self.declared
            hints = get_type_hints(fn)
            self.reading = {c: without_none(hints[c]) for c in self.reads
                            if hints.get(c, Any) is not Any}
            self.types = {c: without_none(t) for c, t in
                          get_type_hints(hints["return"]).items() if t is not Any}
        for edge in definition.get("failure_edges", []):
            if edge["from"] == name:  # the engine appends the failure record
                self.writes |= {edge["error_channel"]}


def subgraphs(definition: Mapping[str, Any], inputs: frozenset[str]
              ) -> Iterator[tuple[Mapping[str, Any], frozenset[str]]]:
    """The definition and every subgraph it embeds, each with the channels its input
    fills."""
    yield definition, inputs
    for spec in definition["nodes"].values():
        if spec["type"] == "subgraph":
            yield from subgraphs(spec["definition"],
                                 frozenset(spec.get("input_map", {}).values()))


def problems(definition: Mapping[str, Any], inputs: frozenset[str] = INPUTS,
             extra: Mapping[str, NodeFn] | None = None) -> list[str]:
    found: list[str] = []
    for graph, given in subgraphs(definition, inputs):
        name, channels = graph["name"], set(graph["channels"])
        stages = {n: Stage(graph, n, extra) for n in graph["nodes"]}
        written = set(given).union(*(s.writes for s in stages.values()))
        found += [f"{name}: channel {c!r} is declared but no node writes it and no input "
                  "provides it" for c in sorted(channels - written)]
        for stage in stages.values():
            found += [f"{name}.{stage.name} declares a write to {c!r}, which the definition "
                      "does not have" for c in sorted(stage.declared - channels)]
            found += [f"{name}.{stage.name} reads {c!r}, which the definition does not have"
                      for c in sorted(stage.reads - channels)]
            found += [f"{name}.{stage.name} reads {c!r} as {kind}, {other.name} writes "
                      f"{other.types[c]}" for c, kind in sorted(stage.reading.items())
                      for other in stages.values()
                      if c in other.types and other.types[c] != kind]
        # a route condition runs after the stage it leaves: it reads that stage's writes
        readers = [(s.name, s.reads, before(graph, s.name)) for s in stages.values()]
        readers += [(edge["from"], frozenset(Reads(CONDITIONS[edge["condition"]]).channels),
                     before(graph, edge["from"]) | {edge["from"]})
                    for edge in graph.get("conditional_edges", [])]
        for reader, reads, earlier in readers:
            provided = set(given).union(*(stages[s].writes for s in earlier if s in stages))
            found += [f"{name}.{reader} reads {c!r}, which no stage before it writes and no "
                      "input provides" for c in sorted(set(reads) - provided)]
    return found


@pytest.mark.parametrize("definition", all_definitions(), ids=lambda d: d["name"])
def test_definition_agrees_with_its_nodes(definition: dict[str, Any]):
    assert problems(definition, INPUTS | OTHER_INPUTS.get(definition["name"], frozenset())) == []


def test_every_node_declares_its_writes_and_reads_channels_by_parameter():
    for kind in node_modules():
        fn = node_fn(kind)
        assert writes_of(fn) is not None
        Reads(fn)  # keyword-only parameters are run and cfg only


def test_the_check_finds_a_channel_nobody_writes_and_a_read_nobody_provides():
    """The checker itself: a definition with both faults, and a node writing a channel
    the definition lacks."""
    broken = {
        "name": "broken",
        "channels": {"request": {}, "query": {}, "orphan": {}},
        "nodes": {"terms": {"type": "keyword_query"}, "validate": {"type": "checked_query"}},
        "edges": [{"from": START, "to": "terms"}, {"from": "terms", "to": "validate"},
                  {"from": "validate", "to": END}],
    }
    found = problems(broken)
    assert "broken: channel 'orphan' is declared but no node writes it and no input " \
           "provides it" in found
    assert "broken.terms reads 'query', which no stage before it writes and no input " \
           "provides" in found
    assert any(p.startswith("broken.terms declares a write to 'fts'") for p in found)


class _Count(TypedDict):
    count: int


class _Text(TypedDict):
    text: str


def _counted(request: Any) -> _Count:
    return {"count": 1}


def _said(count: str | None) -> _Text:
    return {"text": str(count)}


def test_the_check_finds_a_channel_read_as_another_type_than_written():
    typed = {
        "name": "typed",
        "channels": {"request": {}, "count": {}, "text": {}},
        "nodes": {"count": {"type": "counted"}, "say": {"type": "said"}},
        "edges": [{"from": START, "to": "count"}, {"from": "count", "to": "say"},
                  {"from": "say", "to": END}],
    }
    found = problems(typed, extra={"counted": _counted, "said": _said})
    assert found == ["typed.say reads 'count' as <class 'str'>, count writes <class 'int'>"]


def test_the_source_scan_finds_every_node_the_modules_register():
    """``node_modules`` reads ``@node`` from the source without importing; importing
    every node module registers exactly the node types it found, each in its module."""
    for path in sorted(NODE_PACKAGE.rglob("*.py")):
        importlib.import_module(
            ".".join(path.relative_to(NODE_PACKAGE.parent).with_suffix("").parts))
    assert {name: fn.__module__ for name, fn in NODES.items()} == node_modules()
