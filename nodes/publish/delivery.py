"""Nodes: carry a bundle to a peer (push) or fetch one from it (pull) over HTTP.

A failure raises ``PeerFailure``; its ``retryable`` tells the engine's retry policy on
these nodes whether to try again (the peer could not be reached, timed out, answered
429 or 5xx, or sent a bundle that did not verify; a refusal — bad token, a bundle it
rejected — is not retried). When the attempts are spent, the graph's failure edge
records the error on the peer's cursor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from nodes.bundles import verify_bundle
from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.sync_input import max_record_bytes
from nodes.publish.sync_cursor import INBOX
from store.cursors import get_cursor
from store.errors import InvalidInput, StenoError
from store.migrations import SCHEMA_VERSION

if TYPE_CHECKING:
    import httpx

__all__ = ["CHUNK", "PeerFailure", "delivered_bundle", "fetched_bundle", "peer_failure"]

CHUNK = 1 << 16
PUSH_PATH, PULL_PATH = "/sync/push", "/sync/pull"


def _headers(run: RunContext) -> dict[str, str]:
    token = run.settings.sync_token  # a SecretStr: its value only goes in the header
    return {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            yield chunk


class PeerFailure(StenoError):
    """An exchange with a peer that failed; ``retryable``: trying again may help."""

    code = "steno.peer"

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message[:2_000])
        self.retryable = retryable


def peer_failure(status: int | None, detail: str) -> PeerFailure:
    """A failed exchange with a peer, and whether trying again may help."""
    retryable = status is None or status == 429 or status >= 500
    where = "could not be reached" if status is None else f"answered HTTP {status}"
    if status in (401, 403):
        detail = "the peer refused the token (set STENO_SYNC_TOKEN to the peer's " \
                 "STENO_HTTP_TOKEN)"
    return PeerFailure(f"the peer {where}: {detail}", retryable=retryable)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text[:500]
    return str(body.get("error", body))[:500] if isinstance(body, dict) else str(body)[:500]


class DeliveredBundleWrites(TypedDict):
    delivery: Any


@node
def delivered_bundle(peer: Any, outgoing: Any, *, run: RunContext) -> DeliveredBundleWrites:
    """POST the outgoing bundle to the peer's /sync/push; its reply says what it stored."""
    import httpx  # here, not at import: servers start without the HTTP client loaded

    path = Path(outgoing["path"])
    headers = {**_headers(run), "Content-Type": "application/zstd",
               "Content-Length": str(path.stat().st_size)}
    try:
        response = httpx.post(peer["url"] + PUSH_PATH, content=_chunks(path), headers=headers,
                              timeout=run.settings.sync_timeout)
    except httpx.HTTPError as ex:
        raise peer_failure(None, f"{type(ex).__name__}: {ex}") from None
    if response.status_code != 200:
        raise peer_failure(response.status_code, _detail(response))
    reply = response.json()
    return {"delivery": {"ok": True, "status": 200, "applied": int(reply["applied"]),
                         "duplicates": int(reply["duplicates"])}}


class FetchedBundleWrites(TypedDict):
    delivery: Any
    incoming: Any
    bundle: Any


@node
def fetched_bundle(peer: Any, spool: Any, *, run: RunContext, cfg: Cfg) -> FetchedBundleWrites:
    """GET the next batch after the inbox cursor from the peer's /sync/pull into the
    spool file, and verify it there: a bundle damaged on the way is fetched again."""
    import httpx  # here, not at import: servers start without the HTTP client loaded

    path = Path(spool)
    with run.store.read() as conn:
        cursor = get_cursor(conn, str(cfg.get("kind") or INBOX), peer["url"])
    after = cursor.position if cursor is not None else 0
    params = {"after": str(after), "limit": str(peer["batch"])}
    try:
        with httpx.stream("GET", peer["url"] + PULL_PATH, params=params,
                          headers=_headers(run),
                          timeout=run.settings.sync_timeout) as response:
            if response.status_code != 200:
                response.read()
                raise peer_failure(response.status_code, _detail(response))
            with open(path, "wb") as fh:
                for chunk in response.iter_bytes(CHUNK):
                    fh.write(chunk)
    except httpx.HTTPError as ex:
        raise peer_failure(None, f"{type(ex).__name__}: {ex}") from None
    try:
        manifest = verify_bundle(path, max_line=max_record_bytes(run),
                                 schema_version=SCHEMA_VERSION)
    except InvalidInput as ex:  # nothing of it was applied
        raise PeerFailure(f"the pulled bundle was refused: {ex}", retryable=True) from None
    return {"delivery": {"ok": True, "status": 200, "after": after},
            "incoming": {"path": str(path), "peer": peer["url"]},
            "bundle": manifest.summary()}
