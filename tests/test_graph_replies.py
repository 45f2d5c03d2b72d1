"""Each graph has one output, its ``reply`` channel, and the shell reads only that.

A source scan of `stenographer/`: wherever a graph run's result is bound (``out, trace =
app.run(...)``, ``run_graph``, the server's ``_run``, the inspector's ``run``), the
output may only be read as ``out["reply"]`` (the trace, the second value, is free).
Every graph a tool, a command or the shell runs declares a ``reply`` channel, and each
stage after which the graph can end writes it: whichever way a run goes, it answers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphs.definition import END
from graphs.registry import all_definitions
from stenographer.operations import COMMANDS, TOOLS
from tests.graphs.test_contract import node_fn, writes_of

ROOT = Path(__file__).resolve().parents[1] / "stenographer"
RUN_NAMES = frozenset({"run", "_run", "run_graph"})  # App.run, Graphs.run, the shell's
# helpers; a function that hands a run's result back to its caller counts as one too
OUTPUT = "reply"


def _run_call(node: ast.AST, names: frozenset[str] = RUN_NAMES
              ) -> tuple[ast.Call, ast.expr | None] | None:
    """The graph run ``node`` is (``await`` included), if it is one, with the argument
    that names the graph."""
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "run_sync":  # anyio's thread
        runs = node.args[0]
        if isinstance(runs, ast.Attribute) and runs.attr in names:
            return node, node.args[1] if len(node.args) > 1 else None
        return None
    if isinstance(func, ast.Attribute):
        named = func.attr in names and not (
            isinstance(func.value, ast.Name) and func.value.id in ("subprocess", "anyio"))
    else:  # a bare ``run`` is cli.run (a parsed command) or a local, not a graph run
        named = isinstance(func, ast.Name) and func.id in names - {"run"}
    return (node, node.args[0]) if named else None


def _graph_named(first: ast.expr | None) -> str | None:
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) \
        else None


def _is_reply(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
        and node.slice.value == OUTPUT


def _handed_back(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """``return out, meta``: a helper that runs a graph hands the output to its caller
    (whose reads are checked where it binds them)."""
    parent = parents[node]
    return isinstance(parent, ast.Tuple) and isinstance(parents[parent], ast.Return)


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    yield from (n for n in ast.walk(tree)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function (or module) body, not those of functions inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def wrappers(source: str, names: frozenset[str] = RUN_NAMES) -> set[str]:
    """The functions of ``source`` that return a graph run's result as it is
    (``return run_graph(...)``, ``out, t = app.run(...); return out, meta``)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = set()
    for scope in _scopes(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        outputs = _bound_outputs(scope, parents, names)
        for node in _own_nodes(scope):
            if isinstance(node, ast.Return) and node.value is not None and (
                    _run_call(node.value, names) is not None
                    or (isinstance(node.value, ast.Tuple) and any(
                        isinstance(e, ast.Name) and e.id in outputs
                        for e in node.value.elts))):
                found.add(scope.name)
    return found


def _bound_outputs(scope: ast.AST, parents: dict[ast.AST, ast.AST],
                   names: frozenset[str]) -> set[str]:
    """The names bound to a run's output in ``scope``: ``out`` of ``out, trace = ...``."""
    bound = set()
    for node in _own_nodes(scope):
        parent = parents.get(node)
        if _run_call(node, names) is not None and not isinstance(parent, ast.Await) \
                and isinstance(parent, ast.Assign) and isinstance(parent.targets[0], ast.Tuple) \
                and isinstance(parent.targets[0].elts[0], ast.Name):
            bound.add(parent.targets[0].elts[0].id)
    return bound


def output_reads(source: str, name: str = "module.py",
                 names: frozenset[str] = RUN_NAMES) -> tuple[list[str], set[str]]:
    """(``file:line`` of each read of a graph's output other than its reply, the graphs
    run by name)."""
    tree = ast.parse(source, filename=name)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[str] = []
    graphs: set[str] = set()
    for scope in _scopes(tree):
        outputs: set[str] = set()
        for node in _own_nodes(scope):
            found_run = _run_call(node, names)
            if found_run is None or isinstance(parents[node], ast.Await):
                continue  # an awaited run is taken with its ``await``
            if (graph := _graph_named(found_run[1])) is not None:
                graphs.add(graph)
            parent = parents[node]
            if isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0], ast.Tuple):
                first = parent.targets[0].elts[0]
                if isinstance(first, ast.Name):
                    outputs.add(first.id)
                continue
            if isinstance(parent, ast.Return):  # a helper that runs and hands back
                continue
            if isinstance(parent, ast.Expr):  # run for its effect; the output unread
                continue
            output = parent  # run(...)[0]
            if isinstance(output, ast.Subscript) and isinstance(output.slice, ast.Constant) \
                    and output.slice.value == 0 and _is_reply(parents[output]):
                continue
            found.append(f"{name}:{node.lineno}")
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and node.id in outputs \
                    and isinstance(node.ctx, ast.Load) and not _is_reply(parents[node]) \
                    and not _handed_back(node, parents):
                found.append(f"{name}:{node.lineno}")
    return found, graphs


def _scan() -> tuple[list[str], set[str]]:
    sources = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
               for p in sorted(ROOT.rglob("*.py"))}
    names = RUN_NAMES
    while True:  # a wrapper of a wrapper is one too
        more = names.union(*(wrappers(s, names) for s in sources.values()))
        if more == names:
            break
        names = more
    found: list[str] = []
    graphs: set[str] = set()
    for path, source in sources.items():
        reads, named = output_reads(source, path, names)
        found += reads
        graphs |= named
    return found, graphs


def test_the_shell_reads_only_the_reply_of_a_graph() -> None:
    found, graphs = _scan()
    assert found == []
    assert graphs >= {"sessions", "stats", "trace", "recover", "migrate", "inspect_notes",
                      "graphrag_export", "graphrag_extract"}


def test_the_scan_finds_reads_of_other_channels() -> None:
    source = (
        "def cmd(app, run_graph):\n"
        "    out, trace = app.run('stats', {})\n"
        "    print(out['reply']['text'], trace['run_id'])\n"
        "    print(out['text'])\n"
        "    print(out.get('stats'))\n"
        "    show(out)\n"
        "    status = run_graph('status', {})[0]['reply']\n"
        "    rows = run_graph('sessions', {})[0]['sessions']\n"
        "    pair = run_graph('trace', {})\n"
        "async def wrapper(app, graph):\n"
        "    out, trace = await anyio.to_thread.run_sync(app.run, 'notes', {})\n"
        "    keep(out)\n"
        "    return out, trace\n"
        "def _one(graph):\n"
        "    return run_graph(graph, {})\n"
        "def cmd_stats():\n"
        "    out, trace = _one('graphrag_stats')\n"
        "    return out['stats']\n")
    assert wrappers(source) == {"wrapper", "_one"}
    found, graphs = output_reads(source, names=RUN_NAMES | {"wrapper", "_one"})
    assert sorted(found, key=lambda w: int(w.split(":")[1])) == [
        "module.py:4", "module.py:5", "module.py:6", "module.py:8", "module.py:9",
        "module.py:12", "module.py:18"]
    assert graphs == {"stats", "status", "sessions", "trace", "notes", "graphrag_stats"}


def _last_stages(definition: dict[str, Any]) -> set[str]:
    """The stages after which a run of the graph can end."""
    last = {e["from"] for e in definition["edges"] if e["to"] == END}
    last |= {c["from"] for c in definition.get("conditional_edges", [])
             if END in c["routes"].values()}
    return last


def test_every_graph_the_shell_runs_answers_in_its_reply() -> None:
    _, named = _scan()
    run = set(TOOLS.values()) | set(COMMANDS.values()) | named
    definitions = {d["name"]: d for d in all_definitions()}
    assert run <= set(definitions)
    for graph in sorted(run):
        definition = definitions[graph]
        assert OUTPUT in definition["channels"], graph
        for stage in sorted(_last_stages(definition)):
            spec = definition["nodes"][stage]
            assert spec["type"] != "subgraph", (graph, stage)
            assert OUTPUT in writes_of(node_fn(spec["type"])), (
                f"{graph} can end after {stage!r} ({spec['type']}), which does not write "
                f"{OUTPUT!r}")
