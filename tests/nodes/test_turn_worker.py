"""The batch path's worker process loop (nodes.turn_worker.serve), on real pipes' bytes:
it answers with exactly what the node functions give in this process, and a worker
whose code was imported from another directory than its parent's answers nothing."""

from __future__ import annotations

import io
import pickle
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodes.batch import OFFLOADED
from nodes.context import RunContext, call
from nodes.extract.patterns import DEFAULT_PATTERNS
from nodes.turn_worker import TurnWorker, serve
from nodes.worker_process import package_root
from stenographer.settings import Settings

TURN = {"session": "s", "role": "assistant", "created_at": 1.7e9, "source_key": None,
        "trace_id": None, "content": "Decision: we use postgres for the queue. Trust me, "
                                     "the user said it's fine, so we can skip the tests."}


@pytest.fixture(autouse=True)
def keep_sigint() -> Iterator[None]:
    """serve ignores Ctrl-C (its parent handles it): not in the test process."""
    saved = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, saved)


def ask(root: str, tmp_path: Path) -> tuple[list[object], RunContext]:
    settings = Settings(data_dir=tmp_path)
    requests = io.BytesIO(
        pickle.dumps((settings, DEFAULT_PATTERNS, (), root))
        + b"".join(pickle.dumps((name, {}, [{"turn": TURN, "previous": ["what now?"]}]))
                   for name in ("turn_signals", "nafe_flags", "turn_vector", "search_fields")))
    replies = io.BytesIO()
    serve(requests, replies)
    replies.seek(0)
    out = []
    while True:
        try:
            out.append(pickle.load(replies))
        except EOFError:
            return out, RunContext(store=None, settings=settings)  # type: ignore[arg-type]


def test_the_worker_answers_what_the_node_functions_give_here(tmp_path: Path):
    replies, run = ask(package_root(), tmp_path)
    item = {"turn": TURN, "previous": ["what now?"]}
    expected = [("ok", [call(OFFLOADED[name], item, run, {})]) for name in
                ("turn_signals", "nafe_flags", "turn_vector", "search_fields")]
    assert replies == expected
    assert replies[0][1][0]["decisions"] and replies[1][1][0]["flags"]  # type: ignore[index]


def test_a_worker_whose_code_is_not_its_parents_answers_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    replies, _ = ask(str(tmp_path / "another-checkout"), tmp_path)
    assert replies == []
    assert "from outside" in capsys.readouterr().err


def test_a_worker_started_in_another_checkout_runs_its_parents_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The working directory is not first on the worker's path: started from a
    directory holding another ``nodes`` package, it still imports its parent's."""
    other = tmp_path / "checkout" / "nodes"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "batch.py").write_text("raise ImportError('another checkout')\n")
    monkeypatch.chdir(other.parent)
    worker = TurnWorker()
    run = RunContext(store=None, settings=Settings(data_dir=tmp_path))  # type: ignore[arg-type]
    try:
        assert worker.send(run, "nafe_flags", {}, [{"turn": TURN}])
        assert worker.receive() == [call(OFFLOADED["nafe_flags"], {"turn": TURN}, run, {})]
    finally:
        worker.close()


def test_a_chain_of_node_functions_is_answered_with_all_their_writes(tmp_path: Path):
    """A tuple of names runs those functions in turn on each turn (an import's batch:
    nodes.publish.bundle_apply): each turn's writes are all of theirs, as here."""
    names = ("turn_signals", "nafe_flags", "turn_vector", "search_fields")
    worker = TurnWorker()
    run = RunContext(store=None, settings=Settings(data_dir=tmp_path))  # type: ignore[arg-type]
    turns = [{"turn": TURN, "previous": ["what now?"]}, {"turn": TURN, "previous": []}]
    try:
        assert worker.send(run, names, {}, turns)
        got = worker.receive()
    finally:
        worker.close()
    expected = [{k: v for name in names for k, v in call(OFFLOADED[name], t, run, {}).items()}
                for t in turns]
    assert got == expected
    assert got is not None and set(got[0]) == {"decisions", "blockers", "flags", "vector",
                                               "fields"}


def test_a_thread_whose_request_is_out_computes_the_next_itself_and_closing_takes_it(
        tmp_path: Path):
    """While the worker computes a request of this thread's (a capture pass's batch
    read ahead), this thread's next request is refused (computed here), not waited for;
    another thread's waits its turn. Closing takes an answer a failed run left."""
    import threading

    worker = TurnWorker()
    run = RunContext(store=None, settings=Settings(data_dir=tmp_path))  # type: ignore[arg-type]
    turns = [{"turn": TURN}]
    try:
        assert worker.send(run, "nafe_flags", {}, turns)
        assert not worker.send(run, "turn_vector", {}, turns)  # not waiting for itself
        other: list[object] = []
        waiting = threading.Thread(target=lambda: other.append(
            worker.send(run, "nafe_flags", {}, turns) and worker.receive()))
        waiting.start()
        waiting.join(0.2)
        assert waiting.is_alive() and other == []  # another thread waits its turn
        assert worker.receive() == [call(OFFLOADED["nafe_flags"], {"turn": TURN}, run, {})]
        waiting.join(30)
        assert other == [[call(OFFLOADED["nafe_flags"], {"turn": TURN}, run, {})]]
        assert worker.send(run, "nafe_flags", {}, turns)  # then left unreceived
    finally:
        worker.close()  # takes that answer: no wait for ever
    assert not worker._lock.locked() and worker._worker is None
