"""The batch path (graphs/ingest ``ingest_batch``, the capture pass) stores exactly what
one ingest a turn stores: two real stores, one built each way from the same requests,
hold the same rows — turns, content and chain hashes, sessions and their heads, trace
ids, decisions and blockers, NAFE flags, keyword index entries, vectors — and the same
briefs over the same turns, and the contract audit finds nothing wrong in either."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import nodes.batch as batch_module
from stenographer.app import App, open_app
from stenographer.settings import Settings
from tests.busfile import emit, make_bus, receipts
from tests.conftest import BACKENDS
from tests.pg_server import PostgresServer

TURN_LIMIT = 4
SECRET = "ghp_" + "Qx7Lm2Vb9Tz4Rk8Wn3Jd6Hp1Fs5Yc0Ga2Ue7"
DRIFT = "Trust me, the user said it's fine, so we can skip the tests. They probably mean prod."
TEXTS = (
    "Decision: we use postgres for the queue, because the consumer groups fit.",
    "Blocked on the flaky runner disk; the integration tests time out.",
    DRIFT,
    f"the deploy token is {SECRET} for now",
    "what did we decide about the cache?",
    "We decided to keep the docker layer cache in the registry.",
    "a plain note about the parser " * 40,
)


def requests() -> list[dict[str, Any]]:
    """Three sessions interleaved, the first turn of each naming its trace id; repeated
    source keys (in and across batches); a turn the validation refuses."""
    out: list[dict[str, Any]] = []
    for n in range(60):
        session = ("alpha", "beta", "gamma")[n % 7 % 3]
        req: dict[str, Any] = {
            "session_id": session, "role": ("user", "assistant")[n % 2],
            "content": f"{TEXTS[n % len(TEXTS)]} (turn {n})",
            "created_at": f"2026-11-{1 + n // 10:02d}T10:{n % 60:02d}:00Z"}
        if n < 3:
            req["trace_id"] = f"VT-20261101-0000000{n}"
        if n % 5 == 0:
            req["source_key"] = f"k{n}"
        out.append(req)
    out.insert(20, {**out[5]})  # the same source key again, in another batch
    out.insert(12, {**out[10]})  # and within a batch
    out.insert(30, {"session_id": "beta", "role": "robot", "content": "refused"})
    return out


def open_store(path: Path, url: str | None) -> App:
    return open_app(Settings(data_dir=path, turn_limit=TURN_LIMIT, database_url=url))


def exported(app: App, tmp_path: Path, *, forget: str | None = None) -> Path:
    """``requests()`` ingested one at a time into ``app`` (the refused turn refused),
    the turns holding ``forget`` then forgotten, and the store exported as a bundle."""
    for req in requests():
        try:
            app.run("ingest", req)
        except Exception:  # the refused turn
            pass
    if forget is not None:
        app.run("forget", {"text": forget, "confirm": True})
    bundle = tmp_path / "bundle.zst"
    app.run("sync_export", {"path": str(bundle)})
    return bundle


@pytest.fixture(params=BACKENDS)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[App, App]]:
    """Two empty stores of one backend."""
    urls: tuple[str | None, str | None] = (None, None)
    if request.param == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        urls = (server.database(), server.database())
    one = open_store(tmp_path / "single", urls[0])
    batched = open_store(tmp_path / "batch", urls[1])
    try:
        yield one, batched
    finally:
        one.close()
        batched.close()


def rows(app: App) -> dict[str, Any]:
    pg = app.store.dialect == "postgresql"
    queries = {
        "exchanges": "SELECT e.id, s.name, e.role, e.created_at, e.content, e.content_hash, "
                     "e.signals, e.source_key, e.trace_id, e.chain_hash FROM exchanges e "
                     "JOIN sessions s ON s.id = e.session_id ORDER BY e.id",
        "sessions": "SELECT name, created_at, last_at, turns, chain_head, trace_id "
                    "FROM sessions ORDER BY name",
        "flags": "SELECT exchange_id, signature, span_start, span_end, span FROM signal_flags "
                 "ORDER BY exchange_id, span_start",
        "keywords": ("SELECT f.rowid, f.doc::text, s.name FROM exchanges_fts f "
                     "JOIN sessions s ON s.id = f.session_id ORDER BY f.rowid" if pg else
                     "SELECT f.rowid, f.body, f.context, f.dated, s.name FROM exchanges_fts f "
                     "JOIN exchanges e ON e.id = f.rowid JOIN sessions s ON s.id = e.session_id "
                     "ORDER BY f.rowid"),
        "vectors": "SELECT rowid, {} FROM exchange_vectors ORDER BY rowid".format(
            "embedding::text" if pg else "vec_to_json(embedding)"),
        # briefs by the turns they hold (their ids follow the order they were made in)
        "briefs": "SELECT s.name, b.tier, b.first_exchange_id, b.last_exchange_id, b.turns, "
                  "b.body, (SELECT {sources} FROM brief_sources x WHERE x.brief_id = b.id) "
                  "FROM briefs b "
                  "JOIN sessions s ON s.id = b.session_id ORDER BY s.name, b.first_exchange_id"
                  .format(sources="string_agg(x.exchange_id || ':' || encode(x.content_hash, "
                          "'hex'), ',' ORDER BY x.exchange_id)" if pg else
                          "group_concat(x.exchange_id || ':' || hex(x.content_hash))"),
        "compressed": "SELECT e.id, b.first_exchange_id FROM exchanges e "
                      "LEFT JOIN briefs b ON b.id = e.brief_id ORDER BY e.id",
    }
    with app.store.read() as conn:
        return {name: [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
                       for r in conn.execute(sql)] for name, sql in queries.items()}


def audit_failures(app: App) -> list[str]:
    out, _ = app.run("contract_audit", {})
    return [c["name"] for c in out["report"]["contracts"] if not c["passed"]]


@pytest.mark.parametrize("size", [7, 25, 1000])
def test_a_batch_stores_what_single_ingests_store(stores: tuple[App, App], size: int):
    stored_alike(stores, size)


def test_a_session_compressed_a_page_at_a_time_stores_the_same(
        stores: tuple[App, App], monkeypatch: pytest.MonkeyPatch):
    """Compression after a batch reads and claims a session's turns a page of whole
    batches at a time: pages of two briefs make the same briefs as single ingests."""
    import nodes.publish.brief

    monkeypatch.setattr(nodes.publish.brief, "READ_PAGE", 2 * TURN_LIMIT)
    stored_alike(stores, 1000)


@pytest.mark.parametrize("lost", [False, True])
def test_a_batch_split_with_the_worker_process_stores_what_single_ingests_store(
        stores: tuple[App, App], monkeypatch: pytest.MonkeyPatch, lost: bool):
    """The per-turn stages that read no store, and the text of the briefs the batch
    makes, run partly in the worker process (nodes.turn_worker); a worker that dies
    leaves its part to this process."""
    monkeypatch.setattr(batch_module, "SPLIT_FROM", 4)
    monkeypatch.setattr(batch_module, "BRIEFS_SPLIT_FROM", 2)
    worker = stores[1].ctx.turn_worker
    assert worker is not None
    asked: list[str | tuple[str, ...]] = []
    send = worker.send

    def sent(run: Any, name: str | tuple[str, ...], cfg: Any, turns: Any, **kw: Any
             ) -> int | None:
        asked.append(name)
        return send(run, name, cfg, turns, **kw)

    monkeypatch.setattr(worker, "send", sent)

    def kill_worker() -> None:
        if lost and worker._worker is not None:
            worker._worker.kill()
            worker._worker.wait()

    stored_alike(stores, 25, between=kill_worker)
    assert worker._broken is lost  # it took its part of each batch, or was found dead
    assert (worker._worker is not None) is not lost
    assert {"redacted_turn", batch_module.EXTRACT, "brief_draft"} <= set(asked)


def stored_alike(stores: tuple[App, App], size: int,
                 between: Callable[[], None] = lambda: None) -> None:
    """Single ingests in one store, batches of ``size`` in the other (``between`` each):
    the same rows, briefs and replies, and a clean audit."""
    one, batched = stores
    reqs = requests()
    replies = []
    for req in reqs:
        try:
            replies.append(one.run("ingest", req)[0]["reply"])
        except Exception as ex:  # the refused turn
            replies.append({"refused": str(ex)})
    outs = []
    for i in range(0, len(reqs), size):
        outs.append(batched.run("ingest_batch", {"turns": reqs[i:i + size]})[0]["reply"])
        between()
    expected = rows(one)
    got = rows(batched)
    for table in expected:
        assert got[table] == expected[table], table
    assert len(expected["briefs"]) >= 10 and expected["flags"] and expected["keywords"]
    assert any(SECRET not in r[4] and "[REDACTED:" in r[4] for r in expected["exchanges"])
    # the batches' replies count what the single replies said
    refused = [r for r in replies if "refused" in r]
    assert sum(len(o["rejected"]) for o in outs) == len(refused) == 1
    assert "role='robot' is not valid" in outs[30 // size]["rejected"][0]["reason"]
    assert sum(o["duplicates"] for o in outs) == sum(
        1 for r in replies if r.get("duplicate")) == 2
    assert sum(o["stored"] for o in outs) == len(expected["exchanges"])
    assert sum(len(o["compressed"]) for o in outs) == len(expected["briefs"])
    assert audit_failures(one) == [] and audit_failures(batched) == []


def test_a_bad_batch_request_says_what_is_valid_and_stores_nothing(stores: tuple[App, App]):
    from store.errors import InvalidInput

    _, batched = stores
    with pytest.raises(InvalidInput, match="turns must be a list of ingest requests"):
        batched.run("ingest_batch", {"turns": "hello"})
    with pytest.raises(InvalidInput, match="turns must be a list"):
        batched.run("ingest_batch", {"turns": [1, 2]})
    assert rows(batched)["exchanges"] == []


def test_a_batch_records_bus_shutdown_events_where_single_ingests_do(tmp_path: Path):
    """Each session's CLAEG shutdown events on the coordination bus become system turns
    (milestone TERMINAL_SHUTDOWN) before its first turn, acknowledged once, as one
    ingest a turn records them: two stores, each with its own bus holding the same
    events."""
    apps = []
    for name in ("single", "batch"):
        shared = tmp_path / f"{name}-shared"
        bus = make_bus(shared)
        emit(bus, "alpha", created_at="2026-11-30T06:00:00+00:00", reason="drift budget")
        emit(bus, "beta", created_at="2026-11-30T06:01:00+00:00")
        emit(bus, "alpha", created_at="2026-11-30T06:02:00+00:00")
        apps.append(open_app(Settings(data_dir=tmp_path / name, turn_limit=TURN_LIMIT,
                                      shared_dir=shared)))
    one, batched = apps
    try:
        reqs = requests()[:20]
        for req in reqs:
            one.run("ingest", req)
        out, _ = batched.run("ingest_batch", {"turns": reqs})
        expected, got = rows(one), rows(batched)
        # An event's turn opens its session here, so the session's trace id is a new
        # (random) one in each store, and the chain hashes and source keys (which name
        # the bus) differ with it: the rest is the same.
        for table in ("flags", "keywords", "vectors", "briefs", "compressed"):
            assert got[table] == expected[table], table
        assert [r[:7] for r in got["exchanges"]] == [r[:7] for r in expected["exchanges"]]
        system = [r for r in got["exchanges"] if r[2] == "system"]
        assert [r[1] for r in system] == ["alpha", "alpha", "beta"]
        assert [s["acknowledged"] for s in out["reply"]["shutdowns"]] == [True] * 3
        again, _ = batched.run("ingest_batch", {"turns": reqs[:1]})  # its source key: stored
        assert again["reply"]["shutdowns"] == [] and again["reply"]["stored"] == 0
        assert len(receipts(tmp_path / "batch-shared" / "coordination.sqlite")) == 3
        with batched.store.read() as conn:
            labels = [str(r[0]) for r in conn.execute("SELECT label FROM milestones")]
        assert len(labels) == 3 and all("TERMINAL_SHUTDOWN" in label for label in labels)
    finally:
        one.close()
        batched.close()


def test_an_import_stores_what_single_ingests_store(stores: tuple[App, App], tmp_path: Path):
    """An import (``sync_import``: the batch writer, with the sender's trace ids) of a
    store built one ingest a turn holds the same turns, hashes and chains, session rows,
    flags, keyword entries, vectors and briefs; its audit is clean."""
    one, imported = stores
    bundle = exported(one, tmp_path)
    got_reply = imported.run("sync_import", {"path": str(bundle)})[0]["reply"]
    expected, got = rows(one), rows(imported)
    assert (got_reply["applied"], got_reply["duplicates"], got_reply["relinked"]) == (
        len(expected["exchanges"]), 0, 0)
    # A sender's trace id is stored with each turn (NULL here would mean "the
    # session's", which the receiving session does not hold): compared as read.
    assert [r[:8] + r[9:] for r in got["exchanges"]] == [
        r[:8] + r[9:] for r in expected["exchanges"]]
    assert traces(imported) == traces(one)
    assert [r[:5] for r in got["sessions"]] == [r[:5] for r in expected["sessions"]]
    for table in ("flags", "keywords", "vectors", "briefs", "compressed"):
        assert got[table] == expected[table], table
    assert audit_failures(imported) == []
    again = imported.run("sync_import", {"path": str(bundle)})[0]["reply"]
    assert (again["applied"], again["duplicates"]) == (0, len(expected["exchanges"]))
    assert rows(imported) == got


@pytest.mark.parametrize("forgotten", [False, True])
def test_an_import_in_overlapped_batches_stores_what_one_batch_after_another_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forgotten: bool):
    """An import computes each batch while it writes the one before
    (nodes.publish.bundle_apply), most of its turns in the worker process. In small
    batches of three interleaved sessions it stores the same rows as an import that
    reads and computes each batch only after the write before it, and (with nothing
    forgotten) as the single ingests it came from. A forgotten turn at the sender (a
    tombstone in the bundle) makes the batch after it be read and computed again."""
    import nodes.publish.bundle_apply as bundle_apply

    monkeypatch.setattr(batch_module, "SPLIT_FROM", 3)
    monkeypatch.setattr(bundle_apply, "BATCH", 7)
    one = open_store(tmp_path / "single", None)
    overlapped = open_store(tmp_path / "overlapped", None)
    serial = open_store(tmp_path / "serial", None)
    try:
        bundle = exported(one, tmp_path, forget="flaky runner disk" if forgotten else None)
        worker = overlapped.ctx.turn_worker
        assert worker is not None
        asked: list[Any] = []
        send, plan, write = worker.send, bundle_apply._planned, bundle_apply._write
        planned: list[int] = []

        def sent(run: Any, name: Any, cfg: Any, turns: Any, **kw: Any) -> int | None:
            asked.append(name)
            return send(run, name, cfg, turns, **kw)

        def counted_plan(*args: Any) -> Any:
            planned.append(1)
            return plan(*args)

        monkeypatch.setattr(worker, "send", sent)
        monkeypatch.setattr(bundle_apply, "_planned", counted_plan)
        reply = overlapped.run("sync_import", {"path": str(bundle)})[0]["reply"]
        plans = len(planned)
        # the reference: every batch read and computed again after the write before it
        monkeypatch.setattr(bundle_apply, "_write", lambda *a: write(*a) and False)
        again = serial.run("sync_import", {"path": str(bundle)})[0]["reply"]
        counts = ("applied", "duplicates", "relinked", "tombstones", "sessions_compressed")
        assert [again[k] for k in counts] == [reply[k] for k in counts]
        batches = (len(planned) - plans + 1) // 2
        assert bundle_apply.EXTRACT in asked  # the worker computed part of the batches
        assert batches > 3 and (plans > batches) is forgotten
        assert bool(reply["tombstones"]) is forgotten
        expected, got = rows(one), rows(overlapped)
        reference = rows(serial)
        # a session a tombstone opens starts when it arrived (each import's own time)
        for rows_ in (got, reference):
            rows_["sessions"] = [(r[0], *r[3:]) for r in rows_["sessions"]]
        assert got == reference
        assert reply["applied"] == len(expected["exchanges"])
        if not forgotten:
            assert [r[:8] + r[9:] for r in got["exchanges"]] == [
                r[:8] + r[9:] for r in expected["exchanges"]]
            for table in ("flags", "keywords", "vectors", "briefs", "compressed"):
                assert got[table] == expected[table], table
        assert audit_failures(overlapped) == [] and audit_failures(serial) == []
    finally:
        for app in (one, overlapped, serial):
            app.close()


def traces(app: App) -> list[tuple[int, str | None]]:
    from store.exchanges import turn_trace_sql

    with app.store.read() as conn:
        return [(int(r[0]), r[1]) for r in conn.execute(
            f"SELECT e.id, {turn_trace_sql('e', 's')} FROM exchanges e "
            "JOIN sessions s ON s.id = e.session_id ORDER BY e.id")]


def test_a_batch_that_fails_beside_the_worker_leaves_it_free_for_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The worker process answers one request at a time: a batch whose own part of a
    stage fails, or an import whose write fails while the worker computes the next
    batch, takes the worker's answer before the error goes up, so the process's next
    batch is computed with the worker (instead of waiting for it for ever)."""
    import nodes.publish.bundle_apply as bundle_apply

    monkeypatch.setattr(batch_module, "SPLIT_FROM", 3)
    monkeypatch.setattr(bundle_apply, "BATCH", 7)
    source = open_store(tmp_path / "source", None)
    app = open_store(tmp_path / "app", None)
    try:
        bundle = exported(source, tmp_path)
        worker = app.ctx.turn_worker
        assert worker is not None
        turns = [{"session_id": "s", "role": "user", "content": f"note {n} on the cache"}
                 for n in range(12)]

        def boom(**_: Any) -> Any:
            raise RuntimeError("this process's part failed")

        # this process's part of a stage fails (the worker runs its own functions). The
        # worker is stopped meanwhile (on a busy machine it could take every turn first),
        # and the stage is the first split one, so none before waits for it.
        app.run("ingest_batch", {"turns": [{**t, "session_id": "warm"} for t in turns]})
        pid = worker.pid
        assert pid is not None
        with monkeypatch.context() as m:
            m.setitem(batch_module.OFFLOADED, "redacted_turn", boom)
            os.kill(pid, signal.SIGSTOP)
            resume = threading.Timer(0.5, os.kill, (pid, signal.SIGCONT))
            resume.start()  # the failed stage waits for the worker's answer
            try:
                with pytest.raises(Exception, match="this process's part failed"):
                    app.run("ingest_batch", {"turns": turns})
            finally:
                resume.join()
                os.kill(pid, signal.SIGCONT)
        assert not held(worker) and not worker._broken
        # the second write fails while the third batch is out at the worker; the third
        # plan fails while the second batch is (queued behind the first)
        for step, nth in (("_write", 2), ("_planned", 3)):
            real, calls = getattr(bundle_apply, step), []

            def failing(*args: Any, real: Any = real, calls: list[int] = calls,
                        nth: int = nth, step: str = step) -> Any:
                calls.append(1)
                if len(calls) == nth:
                    raise RuntimeError(f"{step} failed")
                return real(*args)

            with monkeypatch.context() as m:
                m.setattr(bundle_apply, step, failing)
                with pytest.raises(Exception, match=f"{step} failed"):
                    app.run("sync_import", {"path": str(bundle)})
            assert not held(worker) and not worker._broken
        reply = app.run("sync_import", {"path": str(bundle)})[0]["reply"]
        assert reply["applied"] + reply["duplicates"] == len(rows(source)["exchanges"])
        assert app.run("ingest_batch", {"turns": turns})[0]["reply"]["stored"] == 12
        assert worker._worker is not None and not worker._broken
        assert audit_failures(app) == []
    finally:
        source.close()
        app.close()


def held(worker: Any) -> bool:
    """Whether the worker is still held for an answer nobody takes (then freed: closing
    the store would wait for it for ever)."""
    if not worker._lock.locked():
        return False
    worker._lock.release()
    return True


def test_the_index_entries_computed_with_the_worker_are_those_computed_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A bulk write's first build of the derived index (and a rebuild) reads the turns a
    page at a time and sends the worker each page's entries (fields and words) while
    the page before goes into the index: the entries are those computed in this process. A
    build that fails part-way takes the worker's answer before the error goes up."""
    import nodes.publish.keyword_index as keyword_index

    monkeypatch.setattr(batch_module, "SPLIT_FROM", 3)
    monkeypatch.setattr(keyword_index, "ENTRY_PAGE", 7)
    app = open_store(tmp_path / "app", None)
    try:
        stored = app.run("ingest_batch", {"turns": requests()})[0]["reply"]["stored"]
        worker = app.ctx.turn_worker
        assert worker is not None
        asked: list[Any] = []
        send = worker.send

        def sent(run: Any, name: Any, cfg: Any, turns: Any, **kw: Any) -> int | None:
            asked.append((name, len(turns)))
            return send(run, name, cfg, turns, **kw)

        monkeypatch.setattr(worker, "send", sent)
        with app.store.read() as conn:
            alone = list(keyword_index.stored_entries(conn))
        with app.store.read() as conn, keyword_index.entries_with(app.ctx) as entries_of:
            assert list(entries_of(conn)) == alone
        contexts = [around for _, _, _, ((_, around, _), _) in alone]
        assert len(alone) == stored and sum(1 for c in contexts if c) > stored / 2
        assert asked and all(name == "keyword_columns" for name, _ in asked)
        assert sum(n for _, n in asked) > len(alone) / 2  # the worker was sent most of them
        with pytest.raises(RuntimeError, match="the index failed"), app.store.read() as conn, \
                keyword_index.entries_with(app.ctx) as entries_of:
            for n, _ in enumerate(entries_of(conn)):
                if n == 10:  # the worker is computing the third page meanwhile
                    raise RuntimeError("the index failed")
        assert not held(worker) and not worker._broken
        with app.store.read() as conn, keyword_index.entries_with(app.ctx) as entries_of:
            assert list(entries_of(conn)) == alone
    finally:
        app.close()
