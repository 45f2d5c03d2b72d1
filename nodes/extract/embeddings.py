"""The optional embedding provider's client: batches, timeouts, retries, clear errors.

Two wire formats, both ``POST`` with a JSON body ``{"model": ..., "input": [texts]}``:
an OpenAI-compatible ``/v1/embeddings`` (answer ``{"data": [{"index", "embedding"}]}``,
``Authorization: Bearer <key>`` when a key is configured) and Ollama's ``/api/embed``
(answer ``{"embeddings": [[...], ...]}``).

Nothing here runs unless ``STENO_EMBEDDINGS`` is set; httpx is imported on first use.
A failure raises ``EmbeddingError`` saying what happened and what to check; callers
degrade (the search goes on with its other lists, the backlog waits). After a
failure the provider is not asked again for ``COOLDOWN_S``, so a provider that is down
costs one timeout, not one per call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nodes.extract.embedding_config import EmbeddingConfig
from nodes.publish.wording import counted
from store.errors import StenoError

__all__ = [
    "COOLDOWN_S",
    "QUERY_TIMEOUT_S",
    "EmbeddingError",
    "embed",
    "embed_query",
    "reset_clients",
]

COOLDOWN_S = 30.0  # after a failure, the provider is left alone this long
QUERY_TIMEOUT_S = 3.0  # a search waits at most this long for its query's vector
_BACKOFF_S = 0.2  # first retry delay; doubled each time
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_INPUT_STATUS = frozenset({400, 413, 422})  # about this input: other texts may pass


class EmbeddingError(StenoError):
    """The embedding provider could not embed the texts (down, slow, or a bad answer).

    ``permanent``: the provider rejected the input itself (HTTP 400, 413, 422); asking
    again with the same text will fail again, other texts may pass.
    """

    code = "steno.embeddings"

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class _Client:
    """One HTTP client per configuration, made on first use; remembers the dimension
    and the end of a cool-down after a failure."""

    def __init__(self, config: EmbeddingConfig) -> None:
        import httpx  # here, not at import: never during the MCP handshake

        self.config = config
        headers = {"Content-Type": "application/json"}
        if config.api_key is not None:
            headers["Authorization"] = f"Bearer {config.api_key.get_secret_value()}"
        self.http = httpx.Client(headers=headers, follow_redirects=False)
        self.dim = config.dim
        self.down_until = 0.0
        self.last_error = ""
        self.lock = threading.Lock()

    def close(self) -> None:
        self.http.close()


_CLIENTS: dict[EmbeddingConfig, _Client] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(config: EmbeddingConfig) -> _Client:
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(config)
        if client is None:
            client = _CLIENTS[config] = _Client(config)
        return client


def reset_clients() -> None:
    """Close every client and forget cool-downs (tests; a configuration change)."""
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        client.close()


def _payload(config: EmbeddingConfig, texts: Sequence[str]) -> dict[str, Any]:
    return {"model": config.model, "input": list(texts)}


def _vectors(config: EmbeddingConfig, body: Any, count: int) -> list[list[float]]:
    """The vectors of an answer, in input order; EmbeddingError when it has another shape."""
    try:
        if config.provider == "ollama":
            raw = body["embeddings"]
        else:
            data = sorted(body["data"], key=lambda item: int(item["index"]))
            raw = [item["embedding"] for item in data]
        if not isinstance(raw, list) or len(raw) != count:
            got = counted(len(raw), "vector") if isinstance(raw, list) else "no vectors"
            raise ValueError(f"{got} for {counted(count, 'text')}")
        for vec in raw:
            if not isinstance(vec, list) or not vec or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
                raise ValueError("a vector is not a non-empty list of numbers")
        return raw
    except (KeyError, TypeError, ValueError) as ex:
        expected = ('{"embeddings": [[...]]}' if config.provider == "ollama"
                    else '{"data": [{"index": 0, "embedding": [...]}]}')
        raise EmbeddingError(f"the embedding provider at {config.url} answered in an "
                             f"unexpected form ({ex}); expected {expected}") from None


def _post(client: _Client, texts: Sequence[str], timeout_s: float, retries: int
          ) -> list[list[float]]:
    import httpx

    config = client.config
    attempt = 0
    while True:
        try:
            response = client.http.post(config.url, json=_payload(config, texts),
                                        timeout=timeout_s)
        except httpx.TimeoutException:
            problem = f"no answer within {timeout_s:g} s (STENO_EMBEDDINGS_TIMEOUT)"
        except httpx.TransportError as ex:
            problem = f"cannot connect ({type(ex).__name__}: {ex}); is it running?"
        else:
            if response.status_code == 200:
                try:
                    body = response.json()
                except ValueError:
                    raise EmbeddingError(f"the embedding provider at {config.url} did not "
                                         "answer with JSON") from None
                return _vectors(config, body, len(texts))
            snippet = " ".join(response.text.split())[:200]
            problem = f"HTTP {response.status_code}: {snippet}"
            if response.status_code not in _RETRY_STATUS:
                bad_input = response.status_code in _INPUT_STATUS
                hint = "" if bad_input else " (check STENO_EMBEDDINGS_URL, _MODEL and the key)"
                raise EmbeddingError(f"the embedding provider at {config.url} refused: "
                                     f"{problem}{hint}", permanent=bad_input)
        if attempt >= retries:
            raise EmbeddingError(f"the embedding provider at {config.url} failed after "
                                 f"{counted(attempt + 1, 'attempt')}: {problem}")
        time.sleep(_BACKOFF_S * 2**attempt)
        attempt += 1


def _unit(client: _Client, raw: list[list[float]]) -> list[npt.NDArray[np.float32]]:
    out = []
    for vec in raw:
        if client.dim is None:
            client.dim = len(vec)
        if len(vec) != client.dim:
            raise EmbeddingError(
                f"the embedding provider returned {len(vec)}-dimensional vectors where "
                f"{client.dim} were expected (STENO_EMBEDDINGS_DIM or earlier answers of "
                f"{client.config.model}); a different model needs a different "
                "STENO_EMBEDDINGS_MODEL")
        arr = np.asarray(vec, dtype=np.float32)
        norm = float(np.linalg.norm(arr))
        out.append(arr / norm if norm > 0.0 and np.isfinite(norm) else np.zeros_like(arr))
    return out


def embed(config: EmbeddingConfig, texts: Sequence[str], *, timeout_s: float | None = None,
          retries: int | None = None) -> list[npt.NDArray[np.float32]]:
    """Unit vectors of ``texts`` (in batches of ``config.batch``), in order.

    Raises EmbeddingError; the client then rests for COOLDOWN_S (except for a
    ``permanent`` error, which concerns the input, not the provider).
    """
    client = _client(config)
    now = time.monotonic()
    if now < client.down_until:
        raise EmbeddingError(f"the embedding provider at {config.url} is resting for "
                             f"{client.down_until - now:.0f} s after: {client.last_error}")
    timeout = config.timeout_s if timeout_s is None else min(timeout_s, config.timeout_s)
    out: list[npt.NDArray[np.float32]] = []
    try:
        for start in range(0, len(texts), config.batch):
            batch = texts[start : start + config.batch]
            raw = _post(client, batch, timeout, config.retries if retries is None else retries)
            with client.lock:
                out += _unit(client, raw)
    except EmbeddingError as ex:
        if not ex.permanent:
            client.down_until = time.monotonic() + COOLDOWN_S
            client.last_error = str(ex)
        raise
    return out


def embed_query(config: EmbeddingConfig, text: str) -> npt.NDArray[np.float32]:
    """The unit vector of a search query: at most QUERY_TIMEOUT_S, one retry."""
    return embed(config, [text], timeout_s=QUERY_TIMEOUT_S, retries=1)[0]
