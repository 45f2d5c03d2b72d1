"""Capture passes on transcript files written in both hosts' formats, on a real store.

What must hold: every message captured exactly once across restarts and appends; a
corrupt line in the middle skipped and reported while later lines are still captured;
a truncated file handled; rotation; a crash between an ingest and its cursor update; a
record the ingest graph rejects.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stenographer.app import App, open_app
from stenographer.capture import Capturer, discover
from stenographer.settings import Settings
from tests.capture.transcripts import ClaudeTranscript, CodexTranscript

KINDS = ("claude-code", "codex")


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    return {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}


class Rig:
    """The application on a store, opened and closed like separate capture processes."""

    def __init__(self, dirs: dict[str, Path], **settings: Any) -> None:
        self.dirs = dirs
        self.settings = Settings(data_dir=dirs["data"], capture_claude_dir=dirs["claude"],
                                 capture_codex_dir=dirs["codex"], **settings)
        self.app: App = open_app(self.settings)

    def restart(self) -> None:
        self.app.close()
        self.app = open_app(self.settings)

    def capture(self, batch: int = 200) -> dict[str, Any]:
        sources = discover(KINDS, self.dirs["claude"], self.dirs["codex"])
        return Capturer(self.app, batch=batch).run_pass(sources).as_dict()

    def turns(self, session: str | None = None) -> list[tuple[str, str]]:
        with self.app.store.read() as conn:
            rows = list(conn.execute(
                "SELECT s.name, e.role, e.content FROM exchanges e "
                "JOIN sessions s ON s.id = e.session_id ORDER BY e.id"))
        return [(role, content) for name, role, content in rows
                if session is None or name == session]

    def status(self) -> dict[str, Any]:
        out, _ = self.app.run("status", {})
        capture: dict[str, Any] = out["status"]["capture"]
        return capture


@pytest.fixture
def rig(dirs: dict[str, Path]) -> Iterator[Rig]:
    r = Rig(dirs)
    try:
        yield r
    finally:
        r.app.close()


def claude_session(t: ClaudeTranscript) -> str:
    return f"claude-code:{t.session}"


def codex_session(t: CodexTranscript) -> str:
    return f"codex:{t.session}"


def test_every_message_is_captured_once_across_restarts_and_appends(rig: Rig,
                                                                    dirs: dict[str, Path]):
    claude, codex = ClaudeTranscript(dirs["claude"]), CodexTranscript(dirs["codex"])
    claude.append(claude.user("Kafka or Redis streams for the job queue?"), claude.noise(),
                  claude.assistant("Decision: we went with Redis streams."))
    codex.append(codex.meta(), codex.user("Why is the build failing?"), codex.noise(),
                 codex.assistant("Blocked: the linker cannot find libssl."))
    first = rig.capture()
    assert (first["captured"], first["duplicates"], first["skipped"]) == (4, 0, 0)

    rig.restart()
    assert rig.capture()["captured"] == 0  # nothing new: nothing stored, nothing re-read
    for n in range(3):
        claude.append(claude.user(f"follow-up question {n}"), claude.noise(),
                      claude.assistant(f"answer {n}"))
        codex.append(codex.user(f"codex question {n}"), codex.assistant(f"codex answer {n}"))
        rig.restart()
        assert rig.capture()["captured"] == 4
    assert rig.turns(claude_session(claude)) == claude.said
    assert rig.turns(codex_session(codex)) == codex.said
    assert len(rig.turns()) == len(claude.said) + len(codex.said) == 16

    status = rig.status()
    assert (status["files"], status["captured"], status["skipped"]) == (2, 16, 0)
    for source in status["sources"]:
        assert source["offset"] == source["size"] and source["pending_bytes"] == 0
        assert source["last_success_at"] and source["last_error"] is None


def test_batches_resume_where_the_last_one_ended(rig: Rig, dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(*(claude.user(f"turn number {n}") for n in range(25)))
    assert rig.capture(batch=4)["captured"] == 25
    assert rig.turns() == claude.said


def test_a_corrupt_line_is_skipped_and_reported_and_later_lines_are_captured(
        rig: Rig, dirs: dict[str, Path]):
    claude, codex = ClaudeTranscript(dirs["claude"]), CodexTranscript(dirs["codex"])
    claude.append(claude.user("before the damage"), '{"type": "user", "message": {"rol\n',
                  claude.assistant("after the damage"))
    codex.append(codex.meta(), codex.user("codex before"), "\x00\x00garbage\n",
                 codex.assistant("codex after"))
    report = rig.capture()
    assert (report["captured"], report["skipped"]) == (4, 2)
    by_kind = {d["kind"]: d for d in report["details"]}
    assert [(s["line"], s["reason"][:8]) for s in by_kind["claude-code"]["skipped"]] == [
        (2, "not JSON")]
    assert by_kind["codex"]["skipped"][0]["line"] == 5  # meta and the user turn: 2 lines each
    assert rig.turns(claude_session(claude)) == claude.said
    assert rig.turns(codex_session(codex)) == codex.said

    status = rig.status()
    assert status["skipped"] == 2 and status["captured"] == 4
    assert status["last_error"]["error"].startswith("skipped line")
    claude_status = next(s for s in status["sources"] if s["kind"] == "claude-code")
    assert claude_status["skipped"] == 1 and "line 2" in claude_status["last_error"]
    assert claude_status["last_success_at"] is not None  # the pass still succeeded

    claude.append(claude.user("much later"))
    again = rig.capture()
    assert (again["captured"], again["skipped"]) == (1, 0)  # reported once, not every pass


def test_a_line_still_being_written_waits_for_its_end(rig: Rig, dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    first = claude.user("first")
    full = claude.user("a long message the host is writing")
    claude.append(first, full[:25])
    assert rig.capture()["captured"] == 1
    claude.append(full[25:])
    report = rig.capture()
    assert (report["captured"], report["skipped"]) == (1, 0)
    assert rig.turns() == claude.said


def test_a_truncated_file_is_read_again_from_its_start(rig: Rig, dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(*(claude.user(f"old turn {n}") for n in range(5)))
    assert rig.capture()["captured"] == 5
    # The host truncates the file and starts over with new records.
    fresh = ClaudeTranscript(dirs["claude"])
    claude.path.write_text(fresh.user("new beginning"), encoding="utf-8")
    report = rig.capture()
    assert report["captured"] == 1 and report["details"][0]["reset"] == "truncated"
    assert rig.turns() == claude.said + fresh.said
    assert rig.status()["resets"] == 1


def test_a_rewritten_file_with_its_old_records_adds_only_the_new_ones(
        rig: Rig, dirs: dict[str, Path]):
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("first question"), codex.assistant("first answer"))
    assert rig.capture()["captured"] == 2
    old = codex.path.read_text(encoding="utf-8")
    # Rewritten in place (a new inode), the same records and one more.
    tmp = codex.path.with_suffix(".tmp")
    tmp.write_text(old + codex.user("second question"), encoding="utf-8")
    os.replace(tmp, codex.path)
    report = rig.capture()
    assert (report["captured"], report["duplicates"]) == (1, 2)
    assert report["details"][0]["reset"] == "replaced"
    assert rig.turns() == codex.said


def test_a_rotated_file_is_drained_before_its_successor(rig: Rig, dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(claude.user("one"), claude.user("two"))
    assert rig.capture()["captured"] == 2
    claude.append(claude.user("three, written just before the rotation"))
    claude.path.rename(claude.path.with_name(claude.path.name + ".1"))
    claude.append(claude.user("four, in the new file"))
    report = rig.capture()
    assert report["captured"] == 2 and report["duplicates"] == 0
    assert rig.turns() == claude.said
    assert rig.capture()["captured"] == 0


def test_copy_and_truncate_rotation_loses_nothing(rig: Rig, dirs: dict[str, Path]):
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("alpha"))
    assert rig.capture()["captured"] == 1
    codex.append(codex.assistant("beta, copied away before it was read"))
    data = codex.path.read_bytes()
    codex.path.with_name(codex.path.name + ".1").write_bytes(data)
    codex.path.write_bytes(b"")  # copytruncate: same inode, now empty
    codex.append(codex.meta(), codex.user("gamma"))
    rig.capture()
    assert rig.turns() == codex.said


def test_a_crash_between_ingest_and_cursor_update_stores_nothing_twice(
        rig: Rig, dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(*(claude.user(f"turn {n}") for n in range(6)))
    # A pass that stored the turns and died before its cursor moved:
    out, _ = rig.app.run("capture_read", {"kind": "claude-code", "path": str(claude.path),
                                          "max_records": 200})
    for rec in out["batch"]["records"][:4]:
        rig.app.run("ingest", rec["request"])
    rig.restart()
    report = rig.capture()
    assert (report["captured"], report["duplicates"]) == (2, 4)
    assert rig.turns() == claude.said


def test_a_record_the_ingest_graph_rejects_is_skipped_and_reported(dirs: dict[str, Path]):
    small = Rig(dirs, max_content_chars=100)
    try:
        codex = CodexTranscript(dirs["codex"])
        codex.append(codex.meta(), codex.user("short"), codex.assistant("x" * 500),
                     codex.user("still captured"))
        report = small.capture()
        assert (report["captured"], report["skipped"]) == (2, 1)
        reason = report["details"][0]["skipped"][0]["reason"]
        assert reason.startswith("rejected:") and "at most 100" in reason
        assert [c for _, c in small.turns()] == ["short", "still captured"]
    finally:
        small.app.close()


def test_sub_agent_transcripts_are_not_followed(dirs: dict[str, Path]):
    main = ClaudeTranscript(dirs["claude"])
    main.append(main.user("hi"))
    agent = dirs["claude"] / main.project / "agent-1a2b3c4d.jsonl"
    agent.write_text(main.user("sub-agent prompt"), encoding="utf-8")
    nested = dirs["claude"] / main.project / main.session / "subagents" / "agent-x.jsonl"
    nested.parent.mkdir(parents=True)
    nested.write_text(main.user("nested"), encoding="utf-8")
    assert discover(KINDS, dirs["claude"], dirs["codex"]) == [("claude-code", main.path)]


def test_bad_capture_requests_say_what_is_valid_and_change_nothing(rig: Rig):
    from store.errors import InvalidInput

    with pytest.raises(InvalidInput, match="valid kinds: claude-code, codex"):
        rig.app.run("capture_read", {"kind": "vim", "path": "/x.jsonl", "max_records": 5})
    with pytest.raises(InvalidInput, match="must be absolute"):
        rig.app.run("capture_read", {"kind": "codex", "path": "x.jsonl", "max_records": 5})
    with pytest.raises(InvalidInput, match="max_records"):
        rig.app.run("capture_read", {"kind": "codex", "path": "/x.jsonl", "max_records": 0})
    with pytest.raises(InvalidInput, match="position"):
        rig.app.run("capture_commit", {"kind": "codex", "path": "/x.jsonl", "position": -1,
                                       "lines": 0})
    with pytest.raises(InvalidInput, match="captured"):
        rig.app.run("capture_commit", {"kind": "codex", "path": "/x.jsonl", "position": 1,
                                       "lines": 1, "captured": "many"})
    assert rig.status()["files"] == 0


def test_a_missing_file_is_reported_not_fatal(rig: Rig, dirs: dict[str, Path]):
    folder = dirs["codex"] / "rollout-not-a-file.jsonl"
    folder.mkdir(parents=True)
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("still captured"))
    report = Capturer(rig.app).run_pass([("codex", dirs["codex"] / "gone.jsonl"),
                                         ("codex", folder), ("codex", codex.path)]).as_dict()
    assert report["errors"] == 2 and report["captured"] == 1
    assert all("cannot be read" in d["error"] for d in report["details"][:2])


def test_a_session_learns_the_directory_its_records_name(rig: Rig, dirs: dict[str, Path]):
    """Claude Code records carry ``cwd``; Codex names it in session_meta and turn_context."""
    claude = ClaudeTranscript(dirs["claude"], cwd="/home/me/work/app")
    claude.append(claude.user("where are we"))
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("and here"))
    rig.capture()
    moved = ClaudeTranscript(dirs["claude"], cwd="/home/me/work/app/sub", n=claude.n)
    moved.append(moved.user("moved into a sub-directory"))
    rig.capture()

    def cwd_of() -> dict[str, str | None]:
        with rig.app.store.read() as conn:
            return {str(n): c for n, c in conn.execute("SELECT name, cwd FROM sessions")}

    assert cwd_of() == {f"claude-code:{claude.session}": "/home/me/work/app/sub",
                        f"codex:{codex.session}": "/home/me/work/app"}
    codex.append(codex.noise(), codex.assistant("the turn context names another directory"))
    rig.capture()
    assert cwd_of()[f"codex:{codex.session}"] == "/home/me"  # noise() holds a turn_context


@pytest.mark.parametrize("failing", ["capture_items", "previous_after"])
def test_a_read_ahead_that_fails_leaves_the_worker_free_and_the_file_for_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str):
    """The batch in hand, itself read ahead, is finished inside ``read_ahead`` once the
    next is read and validated. Reading the next failing before that (its records) or
    after (the turns before each) fails the file with the batch in hand unstored and
    the worker free, its answer taken once; the next pass captures every record."""
    import nodes.batch as batch_module
    import nodes.publish.capture_pass as capture_pass
    from tests.graphs.test_ingest_batch import audit_failures, held

    monkeypatch.setattr(batch_module, "SPLIT_FROM", 3)
    claude = tmp_path / "claude"
    t = ClaudeTranscript(claude)
    t.append(*[t.user(f"we decided to keep the queue on redis, note {n}") for n in range(40)])
    app = open_app(Settings(data_dir=tmp_path / "data", turn_limit=8))
    try:
        worker = app.ctx.turn_worker
        assert worker is not None
        real, calls = getattr(capture_pass, failing), []

        def broken(*args: Any, **kw: Any) -> Any:
            calls.append(1)
            if len(calls) == 3:  # the second batch read ahead, the first in hand taken
                raise RuntimeError("reading ahead failed")
            return real(*args, **kw)

        request = {"request": {"sources": [{"kind": "claude-code", "path": str(t.path)}],
                               "max_records": 7}}
        with monkeypatch.context() as m:
            m.setattr(capture_pass, failing, broken)
            out, _ = app.graphs.run("capture", request, app.ctx)
        report = out["reply"]["files"][0]
        assert "reading ahead failed" in report["error"] and report["captured"] == 14
        assert not held(worker) and not worker._broken
        out, _ = app.graphs.run("capture", request, app.ctx)
        assert out["reply"]["files"][0]["captured"] == 26 and not held(worker)
        assert audit_failures(app) == []
    finally:
        app.close()


def test_a_batch_read_ahead_stores_what_batch_after_batch_stores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A full batch has the file's next batch read, validated, redacted and mostly
    computed by the worker process while it is stored (``read_ahead``), a file's last
    batch the next file's first, the turns before each and the source keys taken from
    the batch not yet stored: the store ends as a pass without it leaves it (rows,
    hashes, chains, flags, index entries, briefs), a record repeated in the next batch
    included. A batch read ahead and then not taken up (a stop was asked) leaves the
    worker free."""
    import dataclasses
    import threading

    import nodes.batch as batch_module
    from tests.graphs.test_ingest_batch import SECRET, audit_failures, held, rows

    monkeypatch.setattr(batch_module, "SPLIT_FROM", 3)
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    t = ClaudeTranscript(claude)
    chunks = []
    for n in range(40):
        chunks.append(t.user(f"we decided to keep the queue on redis, note {n}"))
        chunks.append(t.assistant(f"blocked on the flaky runner disk, answer {n}"))
    chunks.insert(17, chunks[15])  # a record repeated in the next batch
    t.append(*chunks)
    c = CodexTranscript(codex)
    c.append(c.meta(), *[c.user(f"the token {SECRET} opens deploy {n}") for n in range(30)])
    for f in range(4):  # files of one batch each: each read ahead while the one before
        small = ClaudeTranscript(claude, session=f"00000000-0000-4000-8000-{f:012d}")
        small.append(*[small.user(f"we decided on plan {f}.{n}") for n in range(f + 3)])
    # the first file's session going on in a file of another project, read ahead while
    # the first file's last batch is stored: its first turns follow that batch's
    resumed = ClaudeTranscript(claude, session=t.session, project="-home-me-work-zz")
    resumed.append(*[resumed.user(f"we went on with plan 3.{n}") for n in range(4)])
    stores, reports = [], []
    for name, worker in (("ahead", True), ("plain", False)):
        app = open_app(Settings(data_dir=tmp_path / name, turn_limit=8))
        stores.append(app)
        if not worker:  # no worker process: no batch is read ahead
            monkeypatch.setattr(app, "ctx", dataclasses.replace(app.ctx, turn_worker=None))
        sources = discover(KINDS, claude, codex)
        out, trace = app.graphs.run("capture", {"request": {
            "sources": [{"kind": k, "path": str(p)} for k, p in sources],
            "max_records": 7}}, app.ctx)
        assert sum(f["captured"] for f in out["reply"]["files"]) == 80 + 30 + 3 + 4 + 5 + 6 + 4
        stages = [s["node"] for s in trace["stages"]]
        # a batch read ahead and taken up skips the stages before the store: every
        # batch but the pass's first (the files of one batch included)
        skipped = stages.count("ingest_store") - stages.count("ingest_extract")
        assert skipped == (stages.count("ingest_store") - 1 if worker else 0), stages
        reports.append(out["reply"]["files"])
    try:
        assert reports[0] == reports[1]
        ahead, plain = (rows(app) for app in stores)
        for app, got in zip(stores, (ahead, plain), strict=True):
            with app.store.read() as conn:  # where each file's cursor stands
                got["cursors"] = list(conn.execute(
                    "SELECT kind, name, position, lines, identity, head, session, captured, "
                    "duplicates, skipped, resets FROM cursors ORDER BY kind, name"))
        # the trace ids are made at random, so the chain hashes differ: each chain
        # verifies (the audit)
        ahead["exchanges"] = [r[:8] for r in ahead["exchanges"]]
        plain["exchanges"] = [r[:8] for r in plain["exchanges"]]
        ahead["sessions"] = [r[:4] for r in ahead["sessions"]]
        plain["sessions"] = [r[:4] for r in plain["sessions"]]
        assert ahead == plain
        assert audit_failures(stores[0]) == [] and audit_failures(stores[1]) == []
        assert plain["briefs"] and plain["keywords"] and any(
            "[REDACTED:" in r[4] for r in plain["exchanges"])
        # a stop asked while a batch is read ahead: the pass ends, the worker is free
        app = stores[0]
        worker = app.ctx.turn_worker
        assert worker is not None
        t.append(*[t.user(f"one more note {n} on the queue") for n in range(30)])
        stop = threading.Event()
        send = worker.send
        extracts: list[int] = []

        def sent(*args: Any, **kw: Any) -> int | None:
            if isinstance(args[1], tuple):  # the per-turn functions
                extracts.append(1)
                if len(extracts) == 2:  # those of the batch read ahead: then a stop
                    stop.set()
            return send(*args, **kw)

        monkeypatch.setattr(worker, "send", sent)
        ctx = dataclasses.replace(app.ctx, stop=stop)
        out, _ = app.graphs.run("capture", {"request": {
            "sources": [{"kind": "claude-code", "path": str(t.path)}], "max_records": 7}},
            ctx)
        assert stop.is_set() and not held(worker) and not worker._broken
        monkeypatch.setattr(worker, "send", send)
        assert Capturer(app, batch=7).run_pass(discover(KINDS, claude, codex)).captured > 0
        assert app.run("status", {})[0]["status"]["capture"]
    finally:
        for app in stores:
            app.close()
