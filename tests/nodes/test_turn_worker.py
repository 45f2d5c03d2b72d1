"""The batch path's worker process loop (nodes.turn_worker.serve), on real pipes' bytes:
it answers with exactly what the node functions give in this process, and a worker
whose code was imported from another directory than its parent's answers nothing."""

from __future__ import annotations

import io
import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodes.batch import OFFLOADED
from nodes.context import RunContext, call
from nodes.extract.patterns import DEFAULT_PATTERNS
from nodes.turn_worker import Claims, TurnWorker, chained, serve
from nodes.worker_process import PIPE_BYTES, package_root
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
        pickle.dumps((settings, DEFAULT_PATTERNS, (), root, None))
        + b"".join(pickle.dumps((name, {}, [{"turn": TURN, "previous": ["what now?"]}], 0))
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
        assert worker.send(run, "nafe_flags", {}, [{"turn": TURN}]) is not None
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
        assert worker.send(run, names, {}, turns) is not None
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
        assert worker.send(run, "nafe_flags", {}, turns) is not None
        assert worker.send(run, "turn_vector", {}, turns) is None  # not waiting for itself
        other: list[object] = []
        waiting = threading.Thread(target=lambda: other.append(
            worker.send(run, "nafe_flags", {}, turns) is not None and worker.receive()))
        waiting.start()
        waiting.join(0.2)
        assert waiting.is_alive() and other == []  # another thread waits its turn
        assert worker.receive() == [call(OFFLOADED["nafe_flags"], {"turn": TURN}, run, {})]
        waiting.join(30)
        assert other == [[call(OFFLOADED["nafe_flags"], {"turn": TURN}, run, {})]]
        assert worker.send(run, "nafe_flags", {}, turns) is not None  # left unreceived
    finally:
        worker.close()  # takes that answer: no wait for ever
    assert not worker._lock.locked() and worker._worker is None


@pytest.mark.skipif(sys.platform != "linux", reason="pipe sizes are set on Linux only")
def test_a_batch_larger_than_a_default_pipe_is_sent_while_the_worker_is_stopped(
        tmp_path: Path):
    """The pipes to and from a worker hold ``PIPE_BYTES``: a request of several hundred
    kilobytes (a batch's turns) is written whole while the worker reads nothing (here:
    stopped), so the sender never waits on the worker's reading thread."""
    import fcntl

    worker = TurnWorker()
    run = RunContext(store=None, settings=Settings(data_dir=tmp_path))  # type: ignore[arg-type]
    turns = [{"turn": {**TURN, "content": f"{n} {'x' * 590}"}} for n in range(1_000)]
    assert 64 * 1024 * 4 < len(pickle.dumps(turns)) < PIPE_BYTES - 64 * 1024
    try:
        assert worker.send(run, "nafe_flags", {}, turns[:1]) is not None  # started
        assert worker.receive() is not None
        process = worker._worker
        assert process is not None and process.stdin is not None and process.stdout is not None
        for pipe in (process.stdin, process.stdout):
            assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == PIPE_BYTES
        sent = threading.Thread(target=worker.send, args=(run, "nafe_flags", {}, turns))
        os.kill(process.pid, signal.SIGSTOP)
        try:
            sent.start()
            sent.join(10)
            written = not sent.is_alive()
        finally:
            os.kill(process.pid, signal.SIGCONT)
        sent.join(30)
        got = worker.receive()
        assert written  # whole into the pipe, the worker stopped
        assert got is not None and len(got) == len(turns)
    finally:
        worker.close()


def test_the_two_processes_take_turns_from_either_end_and_leave_none_untaken():
    """``Claims`` as the worker (from the first) and this process (from the last) use
    it: each takes the next turn only while the other has not; a counter read late
    lets both take one turn (computed twice, to the same result), never skips one."""
    fd = Claims.make()
    assert fd is not None
    here, there = Claims(fd), Claims(fd)  # two mappings of the page, as two processes
    os.close(fd)
    try:
        here.reset(0)
        assert there.take_first(0, 0, 5) and there.take_first(0, 1, 5)
        assert here.take_last(0, 5) == 4 and here.take_last(0, 5) == 3
        assert there.take_first(0, 2, 5)
        assert here.take_last(0, 5) is None and not there.take_first(0, 3, 5)
        assert here.taken_last(0) == 2  # turns 0-2 the worker's, 3-4 this process's
        here.reset(0)
        assert here.take_last(0, 3) == 2 and here.take_last(0, 3) == 1 and here.take_last(0, 3) == 0
        assert not there.take_first(0, 0, 3) and here.take_last(0, 3) is None
        here.reset(0)
        here.take_all(0, 4)  # a dropped request: the worker takes nothing more
        assert not there.take_first(0, 0, 4)
        here.reset(1)  # the request queued behind it has a slot of its own
        assert there.take_first(1, 0, 4) and here.take_last(1, 4) == 3
        assert not there.take_first(0, 0, 4) and here.taken_last(1) == 1
        for count in range(1, 40):  # any interleaving covers every turn
            for pattern in range(64):
                here.reset(0)
                taken: list[int] = []
                front, step = 0, 0
                while True:
                    if pattern >> (step % 6) & 1:
                        if not there.take_first(0, front, count):
                            break
                        taken.append(front)
                        front += 1
                    elif (index := here.take_last(0, count)) is not None:
                        taken.append(index)
                    elif not there.take_first(0, front, count):
                        break
                    else:
                        taken.append(front)
                        front += 1
                    step += 1
                while (index := here.take_last(0, count)) is not None:
                    taken.append(index)
                assert sorted(taken) == list(range(count))
    finally:
        here.close()
        there.close()


def test_the_worker_answers_the_turns_it_took_before_this_process_took_the_rest(
        tmp_path: Path):
    """A worker given the shared page answers for the first turns only, up to those this
    process took from the last; with every turn taken here it answers none."""
    fd = Claims.make()
    assert fd is not None
    claims = Claims(fd)
    settings = Settings(data_dir=tmp_path)
    run = RunContext(store=None, settings=settings)  # type: ignore[arg-type]
    turns = [{"turn": {**TURN, "content": f"{TURN['content']} ({n})"}} for n in range(5)]
    try:
        for taken_here, answered in ((2, 3), (5, 0), (0, 5)):
            claims.reset(0)
            for _ in range(taken_here):
                claims.take_last(0, len(turns))
            requests = io.BytesIO(pickle.dumps((settings, DEFAULT_PATTERNS, (),
                                                package_root(), fd))
                                  + pickle.dumps(("nafe_flags", {}, turns, 0)))
            replies = io.BytesIO()
            serve(requests, replies)
            status, writes = pickle.loads(replies.getvalue())
            assert status == "ok" and len(writes) == answered
            assert writes == [call(OFFLOADED["nafe_flags"], t, run, {})
                              for t in turns[:answered]]
    finally:
        claims.close()
        os.close(fd)


def test_a_split_computes_every_turn_once_as_here_and_a_dropped_one_stops_the_worker(
        tmp_path: Path):
    """``nodes.batch.split_start`` / ``split_finish`` with a real worker: the worker's
    turns and this process's (taken from the last, after other work or at once) make
    up the batch, each with what this process computes alone; ``split_drop`` takes
    every turn left so the worker stops, and the next request is answered in full."""
    import time

    from nodes.batch import EXTRACT, split_drop, split_finish, split_start

    worker = TurnWorker()
    run = RunContext(store=None, settings=Settings(data_dir=tmp_path),  # type: ignore[arg-type]
                     turn_worker=worker)
    fns = [OFFLOADED[n] for n in EXTRACT]

    def batch(size: int) -> list[dict[str, object]]:
        return [{"turn": {**TURN, "content": f"{TURN['content']} step {n} of the rollout"},
                 "previous": [f"what about step {n}?"]} for n in range(size)]

    def alone(items: list[dict[str, object]]) -> list[dict[str, object]]:
        return [{**i, **chained(call, fns, dict(i), run, None)} for i in items]

    try:
        for pause in (0.0, 0.05):  # at once; after other work (a capture's next batch)
            items = batch(400)
            expected = alone(batch(400))
            split = split_start(run, items, EXTRACT, True)
            assert split.ticket is not None
            time.sleep(pause)
            split_finish(run, split)
            assert items == expected
        dropped = split_start(run, batch(2_000), EXTRACT, True)
        split_drop(run, dropped)
        assert not worker._lock.locked()
        assert worker.send(run, "nafe_flags", {}, batch(3)) is not None
        assert worker.receive() == [call(OFFLOADED["nafe_flags"], t, run, {}) for t in batch(3)]
    finally:
        worker.close()
