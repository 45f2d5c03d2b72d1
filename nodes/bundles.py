"""The bundle format: what export writes, import reads and push/pull carry.

A bundle is one zstd frame (with zstd's own content checksum) of newline-delimited JSON
records, streamed both ways so that memory stays bounded whatever its size:

1. a header: ``{"t": "header", "format": FORMAT, "version": VERSION, "schema_version",
   "created_at", "scope"}``;
2. records in id order: turns ``{"t": "turn", "id", "session", "role", "created_at",
   "content", "chain", "prev"?, "origin"?, "source_key", "trace_id"}`` and tombstones of
   forgotten turns ``{"t": "gone", "id", "session", "content_hash", "chain", "prev"?,
   "origin"?}`` (the chain runs through them). Hashes are hex. ``prev``, the chain
   hash a record follows in its session, is written only where it is not the chain hash of the
   session's record before it in the bundle (a session's first record, always);
   ``origin``, the turn's chain hash in the store that first recorded it, only where it
   is not ``chain``; a turn's content hash is the SHA-256 of its content and is not
   written at all. Random hashes do not compress: leaving out what follows from the
   rest makes a bundle about a quarter smaller;
3. a manifest, last: ``{"t": "manifest", "version", "schema_version", "turns",
   "tombstones", "sessions": {name: {"turns", "head"}}, "first_id", "through",
   "content_bytes", "sha256"}``: counts, each session's newest chain hash in the bundle,
   and the SHA-256 of every byte before the manifest line.

Reading checks everything before anything is applied: the frame, the format and
version, every record's fields, its content hash against its content, its chain hash
against its metadata and ``prev``, each ``prev`` against the record before it in the
same session, and the manifest's counts, heads and checksum.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

from store.errors import InvalidInput
from store.provenance import chain_hash
from store.sync import RecordRow

__all__ = [
    "FORMAT",
    "VERSION",
    "BundleError",
    "BundleWriter",
    "Manifest",
    "records",
    "verify_bundle",
]

FORMAT = "omega-stenographer-bundle"
VERSION = 1
LEVEL = 3  # zstd level: near the best ratio on text at a fraction of the cost of 19
ROLES = ("user", "assistant", "system", "tool")
_HEX64 = frozenset("0123456789abcdef")


class BundleError(InvalidInput):
    """A bundle that is damaged, truncated, of another version, or not a bundle."""

    code = "steno.bundle"


@dataclass
class Manifest:
    turns: int = 0
    tombstones: int = 0
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_id: int | None = None
    through: int | None = None
    content_bytes: int = 0
    schema_version: int = 0

    def summary(self) -> dict[str, Any]:
        return {"turns": self.turns, "tombstones": self.tombstones,
                "sessions": len(self.sessions), "first_id": self.first_id,
                "through": self.through, "content_bytes": self.content_bytes,
                "schema_version": self.schema_version}


# --- writing -----------------------------------------------------------------------------------

class BundleWriter:
    """Writes ``path`` through a ``.part`` file renamed into place by ``finish``: a
    bundle that exists is complete."""

    def __init__(self, path: Path, schema_version: int, scope: dict[str, Any]) -> None:
        self.path = path
        self.part = path.with_name(path.name + ".part")
        self._file: IO[bytes] = open(self.part, "wb")  # noqa: SIM115 (closed by finish/abort)
        cctx = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
        self._zst = cctx.stream_writer(self._file, closefd=False)
        self._sha = hashlib.sha256()
        self.manifest = Manifest(schema_version=schema_version)
        self._line({"t": "header", "format": FORMAT, "version": VERSION,
                    "schema_version": schema_version, "created_at": time.time(),
                    "scope": scope})

    def _line(self, record: dict[str, Any]) -> None:
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        self._sha.update(data)
        self._zst.write(data)

    def add(self, row: RecordRow, prev: bytes) -> None:
        m = self.manifest
        follows = m.sessions.get(row.session, {}).get("head") == prev.hex()
        if row.content is None:
            rec: dict[str, Any] = {"t": "gone", "id": row.id, "session": row.session,
                                   "content_hash": row.content_hash.hex(),
                                   "chain": row.chain_hash.hex()}
            if not follows:
                rec["prev"] = prev.hex()
            if row.origin != row.chain_hash:
                rec["origin"] = row.origin.hex()
            self._line(rec)
            m.tombstones += 1
        else:
            rec = {"t": "turn", "id": row.id, "session": row.session, "role": row.role,
                   "created_at": row.created_at, "content": row.content,
                   "chain": row.chain_hash.hex(), "source_key": row.source_key,
                   "trace_id": row.trace_id}
            if not follows:
                rec["prev"] = prev.hex()
            if row.origin != row.chain_hash:
                rec["origin"] = row.origin.hex()
            self._line(rec)
            m.turns += 1
            m.content_bytes += len(row.content.encode("utf-8"))
            entry = m.sessions.setdefault(row.session, {"turns": 0, "head": None})
            entry["turns"] += 1
        m.sessions.setdefault(row.session, {"turns": 0, "head": None})["head"] = (
            row.chain_hash.hex())
        m.first_id = row.id if m.first_id is None else m.first_id
        m.through = row.id

    def finish(self) -> int:
        """Write the manifest, close, move into place; returns the bundle's size."""
        m = self.manifest
        trailer = {"t": "manifest", "version": VERSION, "schema_version": m.schema_version,
                   "turns": m.turns, "tombstones": m.tombstones, "sessions": m.sessions,
                   "first_id": m.first_id, "through": m.through,
                   "content_bytes": m.content_bytes, "sha256": self._sha.hexdigest()}
        self._zst.write(json.dumps(trailer, ensure_ascii=False,
                                   separators=(",", ":")).encode() + b"\n")
        self._zst.close()  # type: ignore[no-untyped-call]
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.part, self.path)
        return self.path.stat().st_size

    def abort(self) -> None:
        try:
            self._zst.close()  # type: ignore[no-untyped-call]
        except zstandard.ZstdError:
            pass
        self._file.close()
        self.part.unlink(missing_ok=True)


# --- reading -----------------------------------------------------------------------------------

def _lines(path: Path, max_line: int) -> Iterator[bytes]:
    """The bundle's lines, decompressed as they are read."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as ex:
        raise InvalidInput(f"cannot read the bundle {path}: {ex.strerror or ex}") from None
    with raw:
        try:
            reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=False)
            buffered = io.BufferedReader(reader, buffer_size=1 << 16)
            while True:
                line = buffered.readline(max_line + 1)
                if not line:
                    return
                if not line.endswith(b"\n"):
                    if len(line) > max_line:
                        raise BundleError(f"{path} holds a record longer than {max_line:,} "
                                          "bytes: not a bundle this store accepts")
                    raise BundleError(f"{path} is truncated: its last record is incomplete "
                                      "(no manifest). Nothing was applied.")
                yield line
        except zstandard.ZstdError as ex:
            raise BundleError(f"{path} is not a readable zstd bundle ({ex}); it is damaged, "
                              "truncated or not a bundle. Nothing was applied.") from None


def _hexhash(rec: dict[str, Any], key: str, where: str) -> bytes:
    value = rec.get(key)
    if not isinstance(value, str) or len(value) != 64 or not set(value) <= _HEX64:
        raise BundleError(f"{where}: {key} must be 64 lowercase hex digits")
    return bytes.fromhex(value)


def _check_turn(rec: dict[str, Any], where: str) -> None:
    if rec.get("role") not in ROLES:
        raise BundleError(f"{where}: role must be one of {', '.join(ROLES)}")
    for key in ("session", "content"):
        if not isinstance(rec.get(key), str):
            raise BundleError(f"{where}: {key} must be a string")
    created = rec.get("created_at")
    try:
        valid = (not isinstance(created, bool) and isinstance(created, (int, float))
                 and math.isfinite(float(created)) and float(created) >= 0)
    except OverflowError:
        valid = False
    if not valid:
        raise BundleError(f"{where}: created_at must be a finite number of epoch seconds")
    for key in ("source_key", "trace_id"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise BundleError(f"{where}: {key} must be a string or null")


def _parse(line: bytes, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than any record
        raise BundleError(f"{where} is not a JSON record") from None
    if not isinstance(rec, dict):
        raise BundleError(f"{where} is not a JSON object")
    return rec


def _check_header(rec: dict[str, Any], path: Path, schema_version: int) -> int:
    if rec.get("t") != "header" or rec.get("format") != FORMAT:
        raise BundleError(f"{path} is not an Omega Stenographer bundle (its first record "
                          f"is not a {FORMAT} header). Nothing was applied.")
    version = rec.get("version")
    if version != VERSION:
        raise BundleError(f"{path} is a bundle of format version {version!r}; this build "
                          f"reads version {VERSION}. Nothing was applied.")
    bundle_schema = rec.get("schema_version")
    if not isinstance(bundle_schema, int) or not 1 <= bundle_schema <= schema_version:
        raise BundleError(f"{path} was written by a store of schema version "
                          f"{bundle_schema!r}; this store reads bundles of schema versions "
                          f"1 to {schema_version}. Nothing was applied.")
    return bundle_schema


def verify_bundle(path: Path, *, max_line: int, schema_version: int) -> Manifest:
    """Read the whole bundle and check it (see the module docstring); returns its
    manifest. Raises ``BundleError`` saying what is wrong; reads nothing into a store."""
    sha = hashlib.sha256()
    seen = Manifest()
    heads: dict[str, str] = {}
    manifest: dict[str, Any] | None = None
    for number, line in enumerate(_lines(path, max_line), start=1):
        where = f"{path.name} record {number}"
        if manifest is not None:
            raise BundleError(f"{where} follows the manifest: the bundle was altered")
        rec = _parse(line, where)
        if number == 1:
            seen.schema_version = _check_header(rec, path, schema_version)
            sha.update(line)
            continue
        kind = rec.get("t")
        if kind == "manifest":
            manifest = rec
            continue
        sha.update(line)
        if kind not in ("turn", "gone"):
            raise BundleError(f"{where}: unknown record type {kind!r}")
        ident = rec.get("id")
        if isinstance(ident, bool) or not isinstance(ident, int) or ident <= 0:
            raise BundleError(f"{where}: id must be a positive integer")
        if seen.through is not None and ident <= seen.through:
            raise BundleError(f"{where}: ids must increase (#{ident} after #{seen.through})")
        session = rec.get("session")
        if not isinstance(session, str):
            raise BundleError(f"{where}: session must be a string")
        chain = _hexhash(rec, "chain", where)
        if "prev" in rec:
            prev = _hexhash(rec, "prev", where)
            if session in heads and heads[session] != prev.hex():
                raise BundleError(f"{where}: #{ident} does not follow the record before it "
                                  f"in session {session!r} (hash chain broken)")
        elif session in heads:
            prev = bytes.fromhex(heads[session])
        else:
            raise BundleError(f"{where}: #{ident} is the first record of session "
                              f"{session!r} in the bundle and must carry prev")
        if kind == "turn":
            _check_turn(rec, where)
            if "origin" in rec:
                _hexhash(rec, "origin", where)
            try:
                content = rec["content"].encode("utf-8")
            except UnicodeEncodeError:
                raise BundleError(f"{where}: #{ident}'s content is not valid text "
                                  "(a lone surrogate)") from None
            content_hash = hashlib.sha256(content).digest()
            if "content_hash" in rec and _hexhash(rec, "content_hash", where) != content_hash:
                raise BundleError(f"{where}: #{ident}'s content does not match its content "
                                  "hash (damaged)")
            expected = chain_hash(prev, content_hash, session, rec["role"],
                                  float(rec["created_at"]), rec.get("source_key"),
                                  rec.get("trace_id"))
            if expected != chain:
                raise BundleError(f"{where}: #{ident}'s chain hash does not follow from its "
                                  "metadata and the record before it in its session "
                                  "(damaged, altered or a record missing)")
            seen.turns += 1
            seen.content_bytes += len(content)
            entry = seen.sessions.setdefault(session, {"turns": 0, "head": None})
            entry["turns"] += 1
        else:
            _hexhash(rec, "content_hash", where)
            if "origin" in rec:
                _hexhash(rec, "origin", where)
            seen.tombstones += 1
            seen.sessions.setdefault(session, {"turns": 0, "head": None})
        heads[session] = chain.hex()
        seen.sessions[session]["head"] = chain.hex()
        seen.first_id = ident if seen.first_id is None else seen.first_id
        seen.through = ident
    if manifest is None:
        raise BundleError(f"{path} is truncated or incomplete: it has no manifest. "
                          "Nothing was applied.")
    if manifest.get("sha256") != sha.hexdigest():
        raise BundleError(f"{path}: the checksum in the manifest does not match the records "
                          "(damaged or altered). Nothing was applied.")
    for key, value in (("turns", seen.turns), ("tombstones", seen.tombstones),
                       ("sessions", seen.sessions), ("first_id", seen.first_id),
                       ("through", seen.through), ("content_bytes", seen.content_bytes)):
        if manifest.get(key) != value:
            raise BundleError(f"{path}: the manifest's {key} does not match the records "
                              "(damaged or altered). Nothing was applied.")
    return seen


def records(path: Path, *, max_line: int) -> Iterator[dict[str, Any]]:
    """The turns and tombstones of a bundle that ``verify_bundle`` accepted, in order,
    with ``content_hash`` and ``origin`` filled in."""
    for line in _lines(path, max_line):
        rec = json.loads(line)
        if rec.get("t") in ("turn", "gone"):
            if rec["t"] == "turn":
                rec["content_hash"] = hashlib.sha256(rec["content"].encode()).hexdigest()
            rec.setdefault("origin", rec["chain"])
            yield rec
