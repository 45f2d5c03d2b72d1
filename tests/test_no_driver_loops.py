"""Every operation is one graph run: paging, batches, retries and "until done" are loops
inside graphs, and the one loop in `stenographer/` that decides between graph runs is
the scheduler's, which runs a watcher's graph once per tick (background push, bus
publishing and the capture watcher all go through it)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from stenographer import bus, sync
from stenographer.scheduler import BACKOFF_CAP_S, Job, Scheduler, backoff

ROOT = Path(__file__).resolve().parents[1] / "stenographer"
SCHEDULER = "scheduler.py"
RUN_NAMES = {"run", "_run", "run_graph"}  # App.run, the server's and the commands' helpers


def _runs_a_graph(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr in RUN_NAMES and not (
            isinstance(func.value, ast.Name) and func.value.id in ("subprocess", "anyio"))
    return isinstance(func, ast.Name) and func.id in RUN_NAMES


def _calls_in(body: list[ast.stmt]) -> list[ast.Call]:
    """The calls a loop body makes itself (not those of functions it only defines)."""
    found: list[ast.Call] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                             ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def driver_loops(path: Path) -> list[str]:
    """``file:line`` of each while/for loop whose body runs a graph."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [f"{path.name}:{loop.lineno}" for loop in ast.walk(tree)
            if isinstance(loop, (ast.While, ast.For, ast.AsyncFor))
            and any(_runs_a_graph(call) for call in _calls_in(loop.body + loop.orelse))]


def test_no_module_drives_graph_runs_in_a_loop_but_the_scheduler() -> None:
    modules = sorted(ROOT.glob("*.py"))
    assert SCHEDULER in {p.name for p in modules}
    offenders = [where for p in modules if p.name != SCHEDULER for where in driver_loops(p)]
    assert offenders == []
    # The scheduler is the one loop left: exactly one, and it runs the job's tick.
    tree = ast.parse((ROOT / SCHEDULER).read_text(encoding="utf-8"))
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.While, ast.For))]
    assert len(loops) == 1
    assert any(isinstance(c.func, ast.Attribute) and c.func.attr == "tick"
               for c in _calls_in(loops[0].body))


def test_every_command_runs_one_graph_but_the_hosts_and_printers() -> None:
    """The operation table names one graph for every command but those that host or
    drive the others (serve, inspect, demo) and those that print text (config, graphs):
    no command is left choosing between graphs (a host's hook runs the ``hook`` graph
    whatever the event, ``doctor`` the ``doctor`` graph without a store)."""
    from stenographer import operations

    assert set(operations.NO_GRAPH) == {"serve", "inspect", "demo", "config"}
    assert not hasattr(operations, "NOT_ONE_GRAPH")
    assert {"hook": "hook", "doctor": "doctor"}.items() <= operations.COMMANDS.items()
    hook = (ROOT / "capture_cli.py").read_text(encoding="utf-8")
    assert hook.count('app.run("hook"') == 1 and "app.run(\"briefing\"" not in hook


def test_the_check_finds_a_driver_loop(tmp_path: Path) -> None:
    module = tmp_path / "driver.py"
    module.write_text("def drive(app):\n"
                      "    while True:\n"
                      "        out, _ = app.run('sync_push', {})\n"
                      "        if not out['reply']['more']:\n"
                      "            return\n"
                      "    for page in range(3):\n"
                      "        def later():\n"
                      "            return app.run('x', {})\n", encoding="utf-8")
    assert driver_loops(module) == ["driver.py:2"]


def test_background_push_and_bus_publishing_are_scheduler_jobs(tmp_path: Path) -> None:
    settings = SimpleNamespace(sync_peer="http://127.0.0.1:1", sync_interval=30.0,
                               bus_path=tmp_path / "coordination.sqlite", bus_interval=5.0)
    app: Any = SimpleNamespace(settings=settings)
    push, publish = sync.background_push(app), bus.background_publish(app)
    assert isinstance(push, Job) and isinstance(publish, Job)
    assert (push.interval, push.back_off) == (30.0, False)  # the push graph retried itself
    assert (publish.interval, publish.back_off) == (5.0, True)
    assert publish.tick() is True  # no bus file yet: nothing to do, and no graph run
    server = (ROOT / "server.py").read_text(encoding="utf-8")
    capture = (ROOT / "capture.py").read_text(encoding="utf-8")
    assert "Scheduler(background_push(" in server and "Scheduler(background_publish(" in server
    assert "Scheduler(job, stopping=self.stop).run()" in capture


def test_the_scheduler_ticks_backs_off_after_a_failure_and_stops() -> None:
    ticks: list[bool] = []
    done = threading.Event()

    def tick() -> bool:
        ticks.append(len(ticks) != 1)  # the second tick fails
        if len(ticks) == 3:
            done.set()
        return ticks[-1]

    scheduler = Scheduler(Job(name="test", thread="steno-test", tick=tick, interval=0.01))
    scheduler.start()
    assert done.wait(10.0)
    scheduler.stop()
    assert ticks[:3] == [True, False, True] and scheduler.failures == 0
    assert not scheduler._thread.is_alive()
    waits = [backoff(n) for n in range(1, 12)]
    assert 0.375 <= waits[0] <= 0.625 and max(waits) <= BACKOFF_CAP_S * 1.25
