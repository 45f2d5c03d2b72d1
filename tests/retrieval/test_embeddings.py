"""The optional embedding provider, against a real HTTP server started here (127.0.0.1,
random port, a thread): a good one in both wire formats, a slow one, one that is down,
one with the wrong dimension, one that refuses a text. Ingest never calls it; search
fills the backlog, fuses the provider's list, and degrades with a note when it fails."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from constants import EmbeddingConfig
from nodes.extract.embeddings import EmbeddingError, embed, reset_clients
from nodes.publish.search_reply import no_word_note
from stenographer.app import App, open_app
from stenographer.settings import Settings, SettingsError
from tests.conftest import REPO_ROOT
from tests.retrieval.conftest import ids, ingest, search

DIM = 8
# The "model": words of one concept share a component, so "automobile" is near "car"
# although they share no word and no character trigram.
CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "dog": 1, "puppy": 1, "pizza": 2,
            "lasagna": 2, "rain": 3, "umbrella": 3}


def concept_vector(text: str, dim: int = DIM) -> list[float]:
    vec = [0.0] * dim
    for word in text.lower().replace(".", " ").replace("?", " ").split():
        if word in CONCEPTS:
            vec[CONCEPTS[word]] += 1.0
    vec[dim - 1] += 0.1  # never all zeros
    return vec


@dataclass
class Provider:
    """What the fake provider does; what it was asked."""

    wire: str = "openai"  # or "ollama"
    behaviour: str = "good"  # slow, wrong_dim, refuse_marked, not_json
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes]:
        texts = body["input"]
        if self.behaviour == "slow":
            self.release.wait(5.0)  # longer than any client timeout in these tests
        if self.behaviour == "not_json":
            return 200, b"<html>oops</html>"
        if self.behaviour == "refuse_marked" and any("REFUSED" in t for t in texts):
            return 400, b'{"error": "input rejected"}'
        dim = DIM + 1 if self.behaviour == "wrong_dim" else DIM
        vectors = [concept_vector(t, dim) for t in texts]
        if self.wire == "ollama":
            return 200, json.dumps({"model": body["model"], "embeddings": vectors}).encode()
        data = [{"object": "embedding", "index": i, "embedding": v}
                for i, v in reversed(list(enumerate(vectors)))]  # order by index, not position
        return 200, json.dumps({"object": "list", "data": data}).encode()


def serve(provider: Provider) -> Iterator[Provider]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            provider.requests.append(body)
            provider.headers.append(dict(self.headers))
            status, payload = provider.answer(body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (timeout)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = "/api/embed" if provider.wire == "ollama" else "/v1/embeddings"
    provider.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        yield provider
    finally:
        provider.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5.0)


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    reset_clients()
    yield
    reset_clients()


@pytest.fixture
def good() -> Iterator[Provider]:
    yield from serve(Provider())


def config(provider: Provider | str, **overrides: Any) -> EmbeddingConfig:
    url = provider if isinstance(provider, str) else provider.url
    wire = "openai" if isinstance(provider, str) else provider.wire
    values: dict[str, Any] = {"provider": wire, "url": url, "model": "concepts", "dim": DIM,
                              "timeout_s": 2.0, "batch": 16, "retries": 0}
    values.update(overrides)
    return EmbeddingConfig(**values)


def app_with(tmp_path: Path, cfg: EmbeddingConfig) -> App:
    return open_app(Settings(data_dir=tmp_path / "data", turn_limit=1_000, embeddings=cfg))


def seed(app: App) -> dict[str, int]:
    return {"car": ingest(app, "s", "I finally bought a car last week."),
            "dog": ingest(app, "s", "The puppy chewed my slippers."),
            "food": ingest(app, "s", "We had lasagna for dinner.")}


@pytest.mark.parametrize("wire", ["openai", "ollama"])
def test_the_provider_finds_what_shares_no_word(tmp_path: Path, wire: str):
    for provider in serve(Provider(wire=wire)):
        app = app_with(tmp_path, config(provider))
        try:
            turns = seed(app)
            assert provider.requests == []  # ingest never calls the provider
            assert ids(search(app, "automobile", mode="keyword")) == []
            result = search(app, "automobile")
            assert ids(result)[:1] == [turns["car"]]
            # No error; no turn holds the word, which the reply says of these hits.
            assert result["notes"] == [no_word_note(len(result["hits"]))]
            assert {h["match"] for h in result["hits"]} == {"vector"}
            assert {"backlog", "provider"} <= set(result["nodes"])
            assert ids(search(app, "automobile", mode="semantic"))[:1] == [turns["car"]]
            # The backlog went out once, in one batch; then only query vectors.
            assert [len(r["input"]) for r in provider.requests] == [3, 1, 1]
            assert all(r["model"] == "concepts" for r in provider.requests)
        finally:
            app.close()


def test_the_backlog_goes_in_batches_and_only_once(tmp_path: Path, good: Provider):
    app = app_with(tmp_path, config(good, batch=2))
    try:
        for i in range(5):
            ingest(app, "s", f"note {i} about the rain")
        search(app, "umbrella")
        assert [len(r["input"]) for r in good.requests] == [2, 2, 1, 1]  # backlog, query
        search(app, "umbrella")
        assert [len(r["input"]) for r in good.requests][4:] == [1]  # query only
        with app.store.read() as conn:
            stored = conn.execute("SELECT count(*), min(length(embedding)) FROM "
                                  "provider_vectors").fetchone()
        assert tuple(stored) == (5, DIM)  # int8 components
    finally:
        app.close()


def test_the_api_key_goes_in_the_authorization_header(good: Provider):
    embed(config(good, api_key="sk-test-0123456789"), ["car"])
    assert good.headers[0]["Authorization"] == "Bearer sk-test-0123456789"
    assert "sk-test" not in repr(config(good, api_key="sk-test-0123456789"))


def test_a_slow_provider_times_out_and_is_left_alone_for_a_while(tmp_path: Path):
    for slow in serve(Provider(behaviour="slow")):
        app = app_with(tmp_path, config(slow, timeout_s=0.2))
        try:
            turns = seed(app)
            started = time.monotonic()
            result = search(app, "lasagna")
            assert time.monotonic() - started < 3.0
            assert ids(result)[:1] == [turns["food"]]  # the keyword list still answers
            assert any("no answer within 0.2 s" in n for n in result["notes"])
            asked = len(slow.requests)
            again = search(app, "lasagna")
            assert len(slow.requests) == asked  # resting: not asked again
            assert any("resting" in n for n in again["notes"])
        finally:
            app.close()


def test_a_provider_that_is_down_never_stops_ingest_or_search(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens
    app = app_with(tmp_path, config(f"http://127.0.0.1:{port}/v1/embeddings"))
    try:
        turns = seed(app)
        result = search(app, "puppy")
        assert ids(result)[:1] == [turns["dog"]]
        assert any("cannot connect" in n and "is it running?" in n for n in result["notes"])
        with app.store.read() as conn:
            assert conn.execute("SELECT count(*) FROM provider_vectors").fetchone()[0] == 0
    finally:
        app.close()


def test_a_wrong_dimension_is_refused_with_a_clear_error(tmp_path: Path):
    for wrong in serve(Provider(behaviour="wrong_dim")):
        with pytest.raises(EmbeddingError, match=rf"{DIM + 1}-dimensional vectors where "
                                                 rf"{DIM} were expected"):
            embed(config(wrong), ["car"])
        reset_clients()
        app = app_with(tmp_path, config(wrong))
        try:
            seed(app)
            result = search(app, "car")
            assert any("dimensional" in n for n in result["notes"])
            with app.store.read() as conn:
                assert conn.execute("SELECT count(*) FROM provider_vectors").fetchone()[0] == 0
        finally:
            app.close()


def test_an_answer_that_is_not_json_is_a_clear_error():
    for broken in serve(Provider(behaviour="not_json")):
        with pytest.raises(EmbeddingError, match="did not answer with JSON"):
            embed(config(broken), ["car"])


def test_a_refused_text_is_skipped_the_others_are_embedded(tmp_path: Path):
    for picky in serve(Provider(behaviour="refuse_marked")):
        app = app_with(tmp_path, config(picky))
        try:
            ok = ingest(app, "s", "My car is red.")
            refused = ingest(app, "s", "REFUSED text about a dog.")
            later = ingest(app, "s", "The dog sleeps.")
            result = search(app, "puppy")
            assert result["notes"] == [no_word_note(len(result["hits"]))]
            with app.store.read() as conn:
                stored = {r[0] for r in conn.execute("SELECT exchange_id FROM provider_vectors")}
            assert stored == {ok, later}
            assert ids(result)[:1] == [later]
            assert refused in ids(search(app, "dog"))  # still found by its words
        finally:
            app.close()


def test_settings_turn_the_provider_on_and_check_its_values(tmp_path: Path):
    assert Settings.from_env({}).embeddings is None
    assert Settings.from_env({"STENO_EMBEDDINGS": "off"}).embeddings is None
    key_file = tmp_path / "key"
    key_file.write_text("sk-file-key\n")
    cfg = Settings.from_env({
        "STENO_EMBEDDINGS": "ollama", "STENO_EMBEDDINGS_MODEL": "nomic-embed-text",
        "STENO_EMBEDDINGS_DIM": "768", "STENO_EMBEDDINGS_TIMEOUT": "2.5",
        "STENO_EMBEDDINGS_BATCH": "8", "STENO_EMBEDDINGS_API_KEY_FILE": str(key_file)}
    ).embeddings
    assert cfg == EmbeddingConfig(provider="ollama", url="http://127.0.0.1:11434/api/embed",
                                  model="nomic-embed-text", dim=768, api_key="sk-file-key",
                                  timeout_s=2.5, batch=8)
    from_var = Settings.from_env({
        "STENO_EMBEDDINGS": "openai", "STENO_EMBEDDINGS_MODEL": "text-embedding-3-small",
        "STENO_EMBEDDINGS_URL": "http://127.0.0.1:9/v1/embeddings",
        "STENO_EMBEDDINGS_API_KEY_ENV": "MY_KEY", "MY_KEY": "sk-env"}).embeddings
    assert from_var is not None and from_var.api_key is not None
    assert from_var.api_key.get_secret_value() == "sk-env"
    bad = [({"STENO_EMBEDDINGS": "bert"}, "not valid"),
           ({"STENO_EMBEDDINGS": "openai"}, "STENO_EMBEDDINGS_MODEL is required"),
           ({"STENO_EMBEDDINGS": "openai", "STENO_EMBEDDINGS_MODEL": "m",
             "STENO_EMBEDDINGS_URL": "ftp://x"}, "not an http"),
           ({"STENO_EMBEDDINGS": "openai", "STENO_EMBEDDINGS_MODEL": "m",
             "STENO_EMBEDDINGS_API_KEY_ENV": "NOPE"}, "not set"),
           ({"STENO_EMBEDDINGS": "openai", "STENO_EMBEDDINGS_MODEL": "m",
             "STENO_EMBEDDINGS_API_KEY_ENV": "A", "STENO_EMBEDDINGS_API_KEY_FILE": "/x"},
            "not both"),
           ({"STENO_EMBEDDINGS": "openai", "STENO_EMBEDDINGS_MODEL": "m",
             "STENO_EMBEDDINGS_TIMEOUT": "soon"}, "not a number")]
    for env, message in bad:
        with pytest.raises(SettingsError, match=message):
            Settings.from_env(env)


def test_the_provider_client_is_not_imported_with_the_server():
    code = ("import sys; import stenographer.server, graphs.registry, stenographer.settings; "
            "print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
