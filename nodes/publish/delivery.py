"""Nodes: carry a bundle to a peer (push) or fetch one from it (pull) over HTTP.

Failures do not raise: they come back as ``delivery`` = ``{ok: False, retryable,
error}`` so that the graph records them on the peer's cursor and the driver decides
about retrying (``retryable``: the peer could not be reached, timed out, or answered
429 or 5xx; a refusal — bad token, a bundle it rejected — is not retried).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodes.context import State, Writes
from nodes.publish.sync_cursor import INBOX
from store.cursors import get_cursor

if TYPE_CHECKING:
    import httpx

__all__ = ["CHUNK", "delivered_bundle", "fetched_bundle", "peer_failure"]

CHUNK = 1 << 16
PUSH_PATH, PULL_PATH = "/sync/push", "/sync/pull"


def _headers(state: State) -> dict[str, str]:
    token = state.ctx.settings.sync_token
    return {"Authorization": f"Bearer {token}"} if token else {}


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


def peer_failure(status: int | None, detail: str) -> dict[str, Any]:
    """A failed exchange with a peer, and whether trying again may help."""
    retryable = status is None or status == 429 or status >= 500
    where = "could not be reached" if status is None else f"answered HTTP {status}"
    if status in (401, 403):
        detail = "the peer refused the token (set STENO_SYNC_TOKEN to the peer's " \
                 "STENO_HTTP_TOKEN)"
    return {"ok": False, "retryable": retryable, "status": status,
            "error": f"the peer {where}: {detail}"[:2_000]}


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:500]
    return str(body.get("error", body))[:500] if isinstance(body, dict) else str(body)[:500]


def delivered_bundle(state: State, cfg: Mapping[str, Any]) -> Writes:
    """POST the outgoing bundle to the peer's /sync/push; its reply says what it stored."""
    import httpx  # here, not at import: servers start without the HTTP client loaded

    peer, outgoing = state.get("peer"), state.get("outgoing")
    path = Path(outgoing["path"])
    headers = {**_headers(state), "Content-Type": "application/zstd",
               "Content-Length": str(path.stat().st_size)}
    try:
        response = httpx.post(peer["url"] + PUSH_PATH, content=_chunks(path), headers=headers,
                              timeout=state.ctx.settings.sync_timeout)
    except httpx.HTTPError as ex:
        return {"delivery": peer_failure(None, f"{type(ex).__name__}: {ex}")}
    if response.status_code != 200:
        return {"delivery": peer_failure(response.status_code, _detail(response))}
    reply = response.json()
    return {"delivery": {"ok": True, "status": 200, "applied": int(reply["applied"]),
                         "duplicates": int(reply["duplicates"])}}


def fetched_bundle(state: State, cfg: Mapping[str, Any]) -> Writes:
    """GET the next batch after the inbox cursor from the peer's /sync/pull into
    ``request.path``."""
    import httpx  # here, not at import: servers start without the HTTP client loaded

    peer, path = state.get("peer"), Path((state.get("request") or {})["path"])
    with state.ctx.store.read() as conn:
        cursor = get_cursor(conn, str(cfg.get("kind") or INBOX), peer["url"])
    after = cursor.position if cursor is not None else 0
    params = {"after": str(after), "limit": str(peer["batch"])}
    try:
        with httpx.stream("GET", peer["url"] + PULL_PATH, params=params,
                          headers=_headers(state),
                          timeout=state.ctx.settings.sync_timeout) as response:
            if response.status_code != 200:
                response.read()
                return {"delivery": peer_failure(response.status_code, _detail(response))}
            with open(path, "wb") as fh:
                for chunk in response.iter_bytes(CHUNK):
                    fh.write(chunk)
    except httpx.HTTPError as ex:
        return {"delivery": peer_failure(None, f"{type(ex).__name__}: {ex}")}
    return {"delivery": {"ok": True, "status": 200, "after": after},
            "incoming": {"path": str(path), "peer": peer["url"]}}
