"""Nodes: validate export, import, push and pull requests; verify a bundle before
anything of it is applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from constants import PEER_URL_FORM, peer_url
from nodes.bundles import verify_bundle
from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import check_session_id, check_text
from nodes.evaluate_contracts.requests import ExportRequest, ImportRequest, PeerRequest, parsed
from store.errors import InvalidInput
from store.migrations import SCHEMA_VERSION

__all__ = [
    "checked_export",
    "checked_import",
    "checked_peer",
    "max_record_bytes",
    "verified_bundle",
]

def max_record_bytes(run: RunContext) -> int:
    """The longest bundle line accepted: a turn of max_content_chars characters, JSON
    escaped at worst, plus its metadata."""
    return run.settings.max_content_chars * 12 + 64 * 1024


def _path(value: Any, name: str) -> Path:
    text = check_text(name, value, max_chars=4_096)
    return Path(text).expanduser().absolute()


class CheckedExportWrites(TypedDict):
    export: Any


@node
def checked_export(request: Any) -> CheckedExportWrites:
    """``path`` (a new file; refuses to overwrite one unless ``overwrite``), optional
    ``session_id``, ``after`` (export turns after this id) and ``limit`` (records)."""
    raw = request or {}
    given = parsed(ExportRequest, raw)
    path = _path(given.path, "path")
    if path.exists() and not given.overwrite:
        raise InvalidInput(f"{path} already exists; choose a new file name (or overwrite)")
    if not path.parent.is_dir():
        raise InvalidInput(f"{path.parent} is not a directory")
    session = given.session_id
    if session is not None:
        session = check_session_id(session)
    after, limit = given.after, given.limit
    return {"export": {"path": str(path), "session": session, "after": after,
                       "limit": limit}}


class CheckedImportWrites(TypedDict):
    incoming: Any


@node
def checked_import(request: Any) -> CheckedImportWrites:
    """``path`` of an existing bundle, and who it came from (``peer``, recorded with
    the turns that had to be re-linked)."""
    raw = request or {}
    given = parsed(ImportRequest, raw)
    path = _path(given.path, "path")
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file; give the path of a bundle "
                           "(stenographer export writes one)")
    peer = check_text("peer", given.peer or f"file {path.name}", max_chars=500)
    return {"incoming": {"path": str(path), "peer": peer}}


class VerifiedBundleWrites(TypedDict):
    bundle: Any


@node
def verified_bundle(incoming: Any, *, run: RunContext) -> VerifiedBundleWrites:
    """The bundle's manifest once every record was checked (nodes.bundles)."""
    manifest = verify_bundle(Path(incoming["path"]), max_line=max_record_bytes(run),
                             schema_version=SCHEMA_VERSION)
    return {"bundle": manifest.summary()}


DEFAULT_BATCH = 500  # turns per batch when the caller gives none


class CheckedPeerWrites(TypedDict):
    peer: dict[str, Any]


@node
def checked_peer(request: Any) -> CheckedPeerWrites:
    """A peer's base URL and the batch size, for a push or a pull."""
    given = parsed(PeerRequest, request)
    url = peer_url(given.url)
    if url is None:
        raise InvalidInput(f"url={given.url[:200]!r} is not a peer URL ({PEER_URL_FORM})")
    return {"peer": {"url": url, "batch": given.batch or DEFAULT_BATCH}}
