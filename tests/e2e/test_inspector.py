"""The browser inspector end to end: the standalone server (`serve_inspector` in a
subprocess on a random loopback port) over a store seeded through the ingest graph,
its JSON endpoints with httpx, the /inspect mount, and a real headless Chromium driven
by Playwright (Debian's chromium; see tests/browser_setup.py).

Screenshots go to tests/artifacts/inspector*.png.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from stenographer.app import App, open_app
from stenographer.inspector import inspector_app, serve_inspector
from stenographer.inspector.serve import bind_loopback
from stenographer.settings import Settings
from store.errors import NotFound
from tests.browser_setup import CHROMIUM_FLAGS, ensure_chromium
from tests.e2e.support import REPO_ROOT, assert_trace, db_digest, server_env

ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
START_TIMEOUT_S = 60.0
HTTP_TIMEOUT_S = 30.0
BROWSER_TIMEOUT_MS = 30_000

PAYLOAD = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> '
           'zqpayload & "quotes" </pre><b>bold?</b>')
SESSIONS = ("alpha-design", "beta/ops", "gamma review")

TOPICS = (
    "Decision: adopt trunk-based development for the {m} service.",
    "We went with Postgres for {m}; it is boring and well understood.",
    "The build is blocked by a failing migration test in {m}.",
    "Reviewed the {m} dashboards; latency looks flat this week.",
    "Stuck on a timeout in the {m} sync client when the peer is slow.",
    "Notes from the {m} standup: nothing unusual, docs updated.",
)


def marker(i: int) -> str:
    """A word no other turn contains (letters only, so every tokenizer keeps it whole)."""
    return "zqmark" + chr(ord("a") + i // 26) + chr(ord("a") + i % 26)


@dataclass
class Seeded:
    data_dir: Path
    ids: dict[int, int] = field(default_factory=dict)  # turn index -> exchange id
    sessions: dict[str, list[int]] = field(default_factory=dict)  # session -> exchange ids
    contents: dict[int, str] = field(default_factory=dict)  # exchange id -> content
    payload_id: int = 0
    milestone_id: int = 0
    failed_run_id: str = ""


def seed(data_dir: Path, turns: int = 30) -> Seeded:
    """Ingest ``turns`` turns through the ingest graph (so briefs and traces exist)."""
    app = open_app(Settings(data_dir=data_dir))
    out = Seeded(data_dir)
    try:
        for i in range(turns):
            session = SESSIONS[0] if i < 12 else SESSIONS[1] if i < 22 else SESSIONS[2]
            content = TOPICS[i % len(TOPICS)].format(m=marker(i))
            if i == 9:
                content = PAYLOAD
            values, _ = app.run("ingest", {
                "role": ("user", "assistant", "tool")[i % 3], "content": content,
                "session_id": session, "created_at": f"2026-11-0{1 + i // 10}T10:{i:02d}:00Z"})
            exchange_id = int(values["reply"]["exchange_id"])
            out.ids[i] = exchange_id
            out.sessions.setdefault(session, []).append(exchange_id)
            out.contents[exchange_id] = content
        out.payload_id = out.ids[9]
        out.milestone_id = out.ids[1]
        app.run("milestone", {"session_id": SESSIONS[0], "exchange_id": out.milestone_id,
                              "label": "chose Postgres"})
        while app.run("graphrag_batch", {})[0]["published"]["remaining"]:  # the operator's
            pass  # `stenographer graphrag extract`, for the community view
        app.run("graphrag_communities", {})
        try:  # a failed run, for the waterfall's error highlighting
            app.run("milestone", {"session_id": SESSIONS[0], "exchange_id": 10**9,
                                  "label": "nope"})
        except NotFound as ex:
            out.failed_run_id = ex.stage_trace["run_id"]  # type: ignore[attr-defined]
    finally:
        app.close()
    return out


class InspectorProcess:
    """`serve_inspector(settings, port=0)` in a subprocess; stderr read on a thread."""

    def __init__(self, data_dir: Path) -> None:
        code = ("from stenographer.inspector import serve_inspector\n"
                "from stenographer.settings import Settings\n"
                "serve_inspector(Settings.from_env(), port=0)\n")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], env=server_env(data_dir), cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._read, name="inspector-stderr",
                                       daemon=True)
        self.reader.start()
        self.url = self._wait_for_url()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _wait_for_url(self) -> str:
        while True:
            try:
                line = self.lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.stop()
                raise AssertionError("the inspector did not start within "
                                     f"{START_TIMEOUT_S} s: {''.join(self.stderr)}") from None
            if line is None:
                raise AssertionError(f"the inspector exited: {''.join(self.stderr)}")
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                return found.group()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        self.reader.join(timeout=15)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return seed(tmp_path_factory.mktemp("inspector"))


@pytest.fixture(scope="module")
def server(seeded: Seeded) -> Iterator[InspectorProcess]:
    proc = InspectorProcess(seeded.data_dir)
    try:
        yield proc
    finally:
        proc.stop()
    assert proc.proc.returncode == 0, "".join(proc.stderr)


@pytest.fixture(scope="module")
def http(server: InspectorProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S) as client:
        yield client


def ok(http: httpx.Client, path: str) -> dict[str, Any]:
    res = http.get(path)
    assert res.status_code == 200, (path, res.status_code, res.text[:500])
    assert res.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = res.json()
    assert set(body["meta"]) == {"graph", "run_id", "duration_ms"}, body["meta"]
    return body


def error(http: httpx.Client, path: str, status: int, method: str = "GET",
          **kwargs: Any) -> dict[str, Any]:
    res = http.request(method, path, **kwargs)
    assert res.status_code == status, (path, res.status_code, res.text[:500])
    assert res.headers["content-type"].startswith("application/json")
    err: dict[str, Any] = res.json()["error"]
    assert isinstance(err["message"], str) and err["message"], err
    return err


# --- the page -----------------------------------------------------------------------------


def test_page_is_self_contained_and_locked_down(http: httpx.Client) -> None:
    res = http.get("/")
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("text/html")
    html = res.text
    # No external assets: nothing loaded from another origin, no imports, no CDN.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.I)
    assert "@import" not in html and "url(" not in html
    assert html.count("<script>") == 1 and html.count("<style>") == 1
    csp = res.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'", csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert res.headers["x-content-type-options"] == "nosniff"
    assert len(res.content) < 64_000  # small: one request, no framework


# --- JSON endpoints -----------------------------------------------------------------------


def test_sessions_list_counts_and_activity(http: httpx.Client, seeded: Seeded) -> None:
    body = ok(http, "api/sessions")
    assert body["meta"]["graph"] == "inspect_sessions"
    assert body["total"] == len(SESSIONS)
    by_name = {s["session_id"]: s for s in body["sessions"]}
    assert set(by_name) == set(SESSIONS)
    # Newest activity first: gamma's turns were ingested last (and are dated last).
    assert body["sessions"][0]["session_id"] == SESSIONS[2]
    for name, ids in seeded.sessions.items():
        s = by_name[name]
        assert s["turns"] == len(ids)
        assert 0 <= s["uncompressed"] < s["turns"]
        assert s["briefs"] >= 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", s["last_at"])
        assert s["created_at"] <= s["last_at"]
    assert by_name[SESSIONS[0]]["milestones"] == 1
    counts = body["counts"]
    assert counts["exchanges"] == 30 and counts["sessions"] == 3
    assert ok(http, "api/sessions?limit=1&offset=1")["sessions"] == body["sessions"][1:2]
    assert "limit" in error(http, "api/sessions?limit=0", 400)["message"]
    assert "limit" in error(http, "api/sessions?limit=ten", 400)["message"]


def test_running_notes_of_a_session(http: httpx.Client, seeded: Seeded) -> None:
    name = SESSIONS[1]  # has a slash: the path carries it encoded
    body = ok(http, "api/notes/beta%2Fops")
    assert body["session_id"] == name and body["meta"]["graph"] == "inspect_notes"
    assert body["briefs"], body
    ids = set(seeded.sessions[name])
    sources = {i for b in body["briefs"] for i in b["source_ids"]}
    live = {t["id"] for t in body["live"]}
    assert sources | live == ids and not sources & live
    assert body["markdown"].startswith("# Running notes")
    alpha = ok(http, "api/notes/alpha-design")
    assert [m["exchange_id"] for m in alpha["milestones"]] == [seeded.milestone_id]
    assert "no session" in error(http, "api/notes/no-such-session", 404)["message"]
    assert ok(http, "api/notes?session=beta%2Fops")["briefs"] == body["briefs"]
    assert "session_id" in error(http, "api/notes", 400)["message"]


def test_search_results_cite_provenance(http: httpx.Client, seeded: Seeded) -> None:
    target = seeded.ids[2]  # "blocked by a failing migration test": compressed in alpha
    body = ok(http, f"api/search?q={marker(2)}")
    assert body["meta"]["graph"] == "search"
    assert body["hits"][0]["exchange_id"] == target
    hit = body["hits"][0]
    assert hit["session_id"] == SESSIONS[0] and hit["role"] == "tool"
    assert hit["created_at"] == "2026-11-01T10:02:00Z"
    assert hit["blockers"] and not hit["decisions"]
    assert isinstance(hit["brief_id"], int)  # compressed: cites the brief that holds it
    assert marker(2) in hit["snippet"]
    scoped = ok(http, f"api/search?q={marker(2)}&session=gamma%20review&mode=keyword")
    assert scoped["hits"] == [] and scoped["mode"] == "keyword"
    natural = ok(http, "api/search?q=which+database+did+we+go+with&limit=3")
    assert len(natural["hits"]) <= 3 and natural["total"] >= 1
    assert "query" in error(http, "api/search?q=", 400)["message"]
    assert "mode" in error(http, "api/search?q=x&mode=magic", 400)["message"]


def test_turn_view_has_everything(http: httpx.Client, seeded: Seeded) -> None:
    turn = ok(http, f"api/exchange/{seeded.milestone_id}")["exchange"]
    assert turn["content"] == seeded.contents[seeded.milestone_id]
    assert turn["session_id"] == SESSIONS[0] and turn["role"] == "assistant"
    assert turn["decisions"] and turn["milestone"] == "chose Postgres"
    assert turn["brief"]["id"] and seeded.milestone_id in turn["brief"]["source_ids"]
    assert turn["brief"]["tier"] == "A"
    assert turn["previous_id"] == seeded.ids[0] and turn["next_id"] == seeded.ids[2]
    assert re.fullmatch(r"[0-9a-f]{64}", turn["content_hash"])
    payload = ok(http, f"api/exchange/{seeded.payload_id}")["exchange"]
    assert payload["content"] == PAYLOAD  # stored and served verbatim; the page escapes
    first = ok(http, f"api/exchange/{seeded.ids[0]}")["exchange"]
    assert first["previous_id"] is None
    assert "does not exist" in error(http, "api/exchange/999999", 404)["message"]
    for bad in ("abc", "0", "-1", "1.5", str(2**64)):
        assert "exchange_id" in error(http, f"api/exchange/{bad}", 400)["message"]


def test_brief_with_its_source_turns(http: httpx.Client, seeded: Seeded) -> None:
    turn = ok(http, f"api/exchange/{seeded.ids[2]}")["exchange"]
    brief = ok(http, f"api/briefs/{turn['brief']['id']}")["brief"]
    assert brief["session_id"] == SESSIONS[0]
    assert [s["id"] for s in brief["sources"]] == brief["source_ids"]
    assert seeded.ids[2] in brief["source_ids"]
    for source in brief["sources"]:
        assert source["present"] and source["hash_matches"], source
        assert seeded.contents[source["id"]].startswith(source["excerpt"])
    assert "does not exist" in error(http, "api/briefs/424242", 404)["message"]
    assert "brief_id" in error(http, "api/briefs/x", 400)["message"]


def test_a_community_of_the_graph_with_its_supporting_turns(http: httpx.Client,
                                                           seeded: Seeded) -> None:
    listing = ok(http, "api/graph/communities")
    assert listing["total"] >= 1 and listing["meta"]["graph"] == "graphrag_community"
    first = listing["communities"][0]
    body = ok(http, f"api/graph/communities/{first['id']}")
    community = body["community"]
    assert community["size"] == first["size"] and community["entities"]
    for entity in community["entities"]:
        assert set(entity["turn_ids"]) <= set(seeded.contents)
    assert 1 <= len(body["sentences"]) <= 5
    for sentence in body["sentences"]:
        content = " ".join(seeded.contents[sentence["exchange_id"]].split())
        assert sentence["text"] in content
    assert "no community" in error(http, "api/graph/communities/99999", 404)["message"]
    assert "community_id" in error(http, "api/graph/communities/x", 400)["message"]


def test_runs_and_one_run_as_a_stage_trace(http: httpx.Client, seeded: Seeded) -> None:
    body = ok(http, "api/runs?limit=200")
    graphs = {r["graph"] for r in body["runs"]}
    assert "ingest" in graphs and "milestone" in graphs
    assert not graphs & set(body["hidden_graphs"])  # the inspector's reads are hidden
    assert "inspect_runs" in body["hidden_graphs"]
    every = ok(http, "api/runs?limit=200&all=1")
    assert "inspect_sessions" in {r["graph"] for r in every["runs"]}
    ingests = ok(http, "api/runs?graph=ingest&limit=5")["runs"]
    assert len(ingests) == 5 and {r["graph"] for r in ingests} == {"ingest"}
    trace = ok(http, f"api/runs/{ingests[0]['run_id']}")["trace"]
    nodes = assert_trace(trace, "ingest")
    assert nodes[0] == "validate" and len(nodes) >= 3
    failed = ok(http, f"api/runs/{seeded.failed_run_id}")["trace"]
    assert failed["status"] == "Failed"
    # The error's kind, code and exchange id; its message (which may quote the
    # input) went to the caller, not into the stored trace.
    assert any(s["error"] and s["error"].startswith(
        "NotFound: steno.not_found, exchange #1000000000, message str[")
        for s in failed["stages"])
    assert "no stored run" in error(http, "api/runs/" + "0" * 32, 404)["message"]
    assert "run_id" in error(http, "api/runs/not-hex!", 400)["message"]
    assert "graph" in error(http, "api/runs?graph=DROP%20TABLE", 400)["message"]


def test_read_only_every_method_but_get_is_refused(http: httpx.Client,
                                                   seeded: Seeded) -> None:
    before = db_digest(seeded.data_dir / "steno.db")
    for path in ("", "api/sessions", "api/search?q=x", f"api/exchange/{seeded.ids[0]}",
                 "api/runs", "api/notes/alpha-design"):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            err = error(http, path, 405, method, content=b"{}")
            assert "read-only" in err["message"]
    for path in ("api/sessions", f"api/search?q={marker(3)}", "api/runs?all=1",
                 f"api/exchange/{seeded.ids[3]}", "api/notes/gamma%20review"):
        ok(http, path)
    assert "no such" in error(http, "api/nothing-here", 404)["message"]
    assert db_digest(seeded.data_dir / "steno.db") == before  # only traces were added


def test_foreign_host_and_origin_are_rejected(http: httpx.Client, server: InspectorProcess
                                              ) -> None:
    for path in ("", "api/sessions"):
        err = error(http, path, 421, headers={"Host": "evil.example:80"})
        assert "Host" in err["message"]
        error(http, path, 403, headers={"Origin": "http://evil.example"})
    port = server.url.rsplit(":", 1)[1].strip("/")
    with httpx.Client(base_url=server.url, timeout=HTTP_TIMEOUT_S,
                      headers={"Origin": f"http://127.0.0.1:{port}"}) as same_origin:
        ok(same_origin, "api/sessions")
    res = http.get("api/sessions", headers={"Host": f"localhost:{port}"})
    assert res.status_code == 200


def test_mounted_under_inspect(seeded: Seeded) -> None:
    """As the HTTP server mounts it: the page at /inspect/, its API at /inspect/api/."""
    app: App = open_app(Settings(data_dir=seeded.data_dir))

    async def get_app() -> App:
        return app

    outer = Starlette(routes=[Mount("/inspect", app=inspector_app(get_app))])
    try:
        with TestClient(outer, base_url="http://127.0.0.1:8765") as client:
            res = client.get("/inspect", follow_redirects=False)
            assert res.status_code in (307, 308)
            assert res.headers["location"].endswith("/inspect/")
            assert client.get("/inspect/").text.startswith("<!doctype html>")
            body = client.get("/inspect/api/sessions").json()
            assert body["total"] == len(SESSIONS)
            assert client.get("/inspect/api/exchange/1").json()["exchange"]["id"] == 1
        with TestClient(outer) as foreign:  # Host: testserver is not loopback
            assert foreign.get("/inspect/api/sessions").status_code == 421
    finally:
        app.close()


def test_standalone_binds_loopback_only(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.168.1.10", "example.com", "::"):
        with pytest.raises(ValueError, match="loopback"):
            serve_inspector(Settings(data_dir=tmp_path), host=host, port=0)
    assert not (tmp_path / "steno.db").exists()  # refused before the store was opened
    sock = bind_loopback("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
    finally:
        sock.close()


def test_unavailable_store_is_a_json_error() -> None:
    async def broken() -> App:
        raise RuntimeError("the store could not be opened: disk on fire")

    with TestClient(inspector_app(broken), base_url="http://127.0.0.1:1") as client:
        res = client.get("/api/sessions")
        assert res.status_code == 503
        assert "disk on fire" in res.json()["error"]["message"]


# --- a real browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> Path:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(f"no Chromium for the browser test: {why}")
    return path


def test_browser_sessions_search_turn_and_waterfall(
        server: InspectorProcess, seeded: Seeded, chromium: Path,
        tmp_path: Path) -> None:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the browser test needs the playwright package "
        "(pip install -e '.[test]')")
    expect = sync_api.expect
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(chromium), headless=True,
            args=[f for f in CHROMIUM_FLAGS if f != "--headless"],
            viewport={"width": 1280, "height": 860})
        try:
            page = context.new_page()
            page.set_default_timeout(BROWSER_TIMEOUT_MS)
            expect.set_options(timeout=BROWSER_TIMEOUT_MS)

            def on_console(message: Any) -> None:
                if message.type in ("error", "warning"):
                    problems.append(f"console {message.type}: {message.text}")

            def on_dialog(dialog: Any) -> None:  # an alert() would mean script injection
                problems.append(f"dialog: {dialog.message}")
                dialog.dismiss()

            def on_request(request: Any) -> None:  # nothing may load from elsewhere
                if not request.url.startswith((server.url, "data:")):
                    problems.append(f"external request: {request.url}")

            page.on("console", on_console)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", on_dialog)
            page.on("request", on_request)

            # Sessions, newest activity first, with counts.
            page.goto(server.url)
            table = page.locator("#sessions")
            expect(table).to_be_visible()
            expect(table.locator("tbody tr")).to_have_count(len(SESSIONS))
            expect(table.locator("tbody tr").first).to_contain_text(SESSIONS[2])
            expect(page.locator("#counts")).to_contain_text("30 turns")
            page.screenshot(path=str(ARTIFACTS / "inspector-sessions.png"), full_page=True)

            # A session's running notes (the session name has a slash).
            table.get_by_role("link", name=SESSIONS[1]).click()
            expect(page.locator("h2")).to_have_text(f"Session {SESSIONS[1]}")
            expect(page.locator(".brief").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "inspector-notes.png"), full_page=True)

            # Search, then open the turn from a hit: the payload turn renders as text.
            page.fill("#q", "zqpayload")
            page.press("#q", "Enter")
            hit = page.locator(".hit").first
            expect(hit).to_contain_text(f"#{seeded.payload_id}")
            expect(hit).to_contain_text(SESSIONS[0])
            expect(hit.locator(".snippet")).to_contain_text("<script>window.__pwned = 1")
            page.screenshot(path=str(ARTIFACTS / "inspector.png"), full_page=True)
            hit.get_by_role("link", name=f"#{seeded.payload_id}").click()
            content = page.locator("#turn-content")
            expect(content).to_have_text(PAYLOAD)
            assert content.locator("script, img, b").count() == 0
            assert page.evaluate("window.__pwned") is None
            expect(page.locator("main")).to_contain_text("not compressed yet")
            page.screenshot(path=str(ARTIFACTS / "inspector-turn.png"), full_page=True)

            # A compressed turn's hit cites its brief; the brief lists its source turns,
            # hash-checked, and each links back to the full turn.
            page.fill("#q", marker(2))
            page.press("#q", "Enter")
            hit = page.locator(".hit").first
            expect(hit).to_contain_text(f"#{seeded.ids[2]}")
            hit.get_by_role("link", name=re.compile(r"^brief \d+$")).click()
            expect(page.locator("h2")).to_contain_text("Brief")
            sources = page.locator(".turn")
            expect(sources.first).to_contain_text("hash ✓")
            page.screenshot(path=str(ARTIFACTS / "inspector-brief.png"), full_page=True)
            sources.get_by_role("link", name=f"#{seeded.ids[2]}").click()
            expect(page.locator("#turn-content")).to_have_text(seeded.contents[seeded.ids[2]])
            expect(page.locator("main .brief")).to_contain_text("tier-")

            # Recent runs, then one ingest run as a waterfall.
            page.click("#nav-runs")
            runs = page.locator("#runs")
            expect(runs).to_be_visible()
            expect(runs).not_to_contain_text("inspect_sessions")
            runs.locator("tr", has_text="ingest").first.get_by_role("link").click()
            waterfall = page.locator("#waterfall")
            expect(waterfall).to_be_visible()
            assert waterfall.locator(".bar").count() >= 3
            expect(waterfall).to_contain_text("validate")
            expect(waterfall.locator(".writes").first).to_contain_text("=")
            page.screenshot(path=str(ARTIFACTS / "inspector-run.png"), full_page=True)

            # A failed run: the failing stage is highlighted with its error.
            page.goto(f"{server.url}#/run/{seeded.failed_run_id}")
            expect(page.locator(".errmsg")).to_contain_text("NotFound: steno.not_found")
            expect(page.locator(".wf .error-row").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "inspector-failed-run.png"), full_page=True)

            # The knowledge graph: a community, its relations and the turns behind them.
            page.click("#nav-graph")
            communities = page.locator("#communities")
            expect(communities.locator("tbody tr").first).to_be_visible()
            communities.locator("tbody tr a").first.click()
            expect(page.locator("h2")).to_contain_text("Community #")
            expect(page.locator("#community-entities tr").first).to_be_visible()
            sentence = page.locator("#community-sentences .card").first
            expect(sentence).to_be_visible()
            sentence.locator(".prov a").first.click()
            expect(page.locator("h2")).to_contain_text("Turn #")
            page.go_back()
            expect(page.locator("#community-sentences")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "inspector-community.png"), full_page=True)

            assert problems == []

            # A bad address shows the server's message, not a blank page (the browser
            # logs the 404 response; nothing else).
            page.goto(f"{server.url}#/exchange/999999")
            expect(page.locator(".err")).to_contain_text("does not exist")
        finally:
            context.close()
    assert all("404" in p for p in problems), problems
