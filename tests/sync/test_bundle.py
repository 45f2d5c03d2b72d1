"""Export and import: bundles that round-trip with their hashes, idempotent imports,
forked sessions, and damaged or foreign bundles refused with nothing applied."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from stenographer.app import App
from store.errors import InvalidInput
from tests.sync.support import (
    audit_passes,
    chains,
    heads,
    identities,
    ingest,
    opened,
    snapshot,
)

TURN_LIMIT = 4


def words(n: int, topic: str) -> list[str]:
    return [f"Turn {i} about {topic}: we decided to keep the {topic} parser small."
            if i % 3 == 0 else f"Turn {i} about {topic}, the build is blocked on tests."
            for i in range(n)]


def export(app: App, path: Path, **request: Any) -> dict[str, Any]:
    out, _ = app.run("sync_export", {"path": str(path), **request})
    return dict(out["reply"])


def import_(app: App, path: Path) -> dict[str, Any]:
    out, _ = app.run("sync_import", {"path": str(path)})
    return dict(out["reply"])


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A store with three sessions, briefs, and one forgotten turn (a tombstone the
    chain runs through)."""
    data = tmp_path / "a"
    with opened(data, turn_limit=TURN_LIMIT) as app:
        ingest(app, "alpha", words(11, "alpha"))
        ids = ingest(app, "beta", words(6, "beta"))
        ingest(app, "gamma", ["Only one turn in gamma."])
        out, _ = app.run("forget", {"exchange_ids": [ids[2]], "confirm": True,
                                    "reason": "test"})
        assert out["reply"]["count"] == 1
    return data


def test_export_then_import_gives_the_same_turns_hashes_and_chains(source: Path,
                                                                   tmp_path: Path):
    bundle = tmp_path / "a.zst"
    with opened(source, turn_limit=TURN_LIMIT) as a:
        sent = export(a, bundle)
    assert (sent["turns"], sent["tombstones"], sent["sessions"]) == (17, 1, 3)
    head = json.loads(_lines(bundle)[0])
    assert head["format"] == "omega-stenographer-bundle" and head["version"] == 1
    with opened(tmp_path / "b", turn_limit=TURN_LIMIT) as b:
        got = import_(b, bundle)
        assert (got["applied"], got["duplicates"], got["relinked"]) == (17, 0, 0)
        assert got["tombstones_applied"] == 1  # the chain runs through it here too
        assert got["sessions_compressed"] >= 1
        assert audit_passes(b)
        hits, _ = b.run("search", {"query": "alpha parser", "session_id": "alpha",
                                   "mode": "hybrid", "limit": 3})
        assert hits["hits"], "imported turns are searchable"
    assert identities(tmp_path / "b") == identities(source)
    # One side wrote and the other follows: the chains are the sender's, bit for bit.
    assert chains(tmp_path / "b") == chains(source)
    assert heads(tmp_path / "b") == heads(source)


def test_importing_the_same_bundle_twice_adds_nothing(source: Path, tmp_path: Path):
    bundle = tmp_path / "a.zst"
    with opened(source) as a:
        export(a, bundle)
    with opened(tmp_path / "b", turn_limit=TURN_LIMIT) as b:
        assert import_(b, bundle)["applied"] == 17
        before = snapshot(tmp_path / "b")
        again = import_(b, bundle)
        assert (again["applied"], again["duplicates"]) == (0, 17)
        assert snapshot(tmp_path / "b") == before
        # The sender is a store that already holds them all too.
        with opened(source) as a:
            assert import_(a, bundle)["applied"] == 0


def test_both_sides_wrote_to_one_session_and_exchange_both_ways(source: Path,
                                                                tmp_path: Path):
    """Forked chains: each store appends what it receives after its own new turns; the
    turns keep their identity, both audits pass, and a third exchange adds nothing."""
    a_dir, b_dir = source, tmp_path / "b"
    with opened(a_dir, turn_limit=TURN_LIMIT) as a, opened(b_dir, turn_limit=TURN_LIMIT) as b:
        export(a, tmp_path / "base.zst")
        import_(b, tmp_path / "base.zst")
        ingest(a, "alpha", ["A's new turn while apart.", "A again."], start=20)
        ingest(b, "alpha", ["B's new turn while apart."], start=30)
        export(a, tmp_path / "a2.zst")
        export(b, tmp_path / "b2.zst")
        to_b = import_(b, tmp_path / "a2.zst")
        to_a = import_(a, tmp_path / "b2.zst")
        assert (to_b["applied"], to_b["relinked"]) == (2, 2)
        assert (to_a["applied"], to_a["relinked"]) == (1, 1)
        assert audit_passes(a) and audit_passes(b)
        assert sorted(identities(a_dir)) == sorted(identities(b_dir))
        assert len(identities(a_dir)) == len(set(identities(a_dir))) == 20
        # Exchanging again, each way, finds every turn known (by origin).
        export(a, tmp_path / "a3.zst")
        export(b, tmp_path / "b3.zst")
        assert import_(b, tmp_path / "a3.zst")["applied"] == 0
        assert import_(a, tmp_path / "b3.zst")["applied"] == 0
        assert audit_passes(a) and audit_passes(b)


def test_a_turn_forgotten_here_is_not_brought_back(source: Path, tmp_path: Path):
    bundle = tmp_path / "a.zst"
    with opened(source) as a:
        export(a, bundle)
    with opened(tmp_path / "b", turn_limit=TURN_LIMIT) as b:
        import_(b, bundle)
        victim = identities(tmp_path / "b")[0]
        out, _ = b.run("forget", {"session_id": victim[0], "text": "Turn 0 about alpha",
                                  "confirm": True, "reason": "secret"})
        assert out["reply"]["count"] == 1
        again = import_(b, bundle)
        assert again["applied"] == 0
        assert victim not in identities(tmp_path / "b")
        assert audit_passes(b)


def test_a_tombstone_keeps_a_forgotten_turn_from_arriving_by_another_path(tmp_path: Path):
    """C got a turn before A forgot it; B gets A's tombstone first, then C's bundle:
    the turn does not come back into B. (C keeps it: forgetting is done where asked.)"""
    a_dir, b_dir, c_dir = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with opened(a_dir) as a, opened(b_dir) as b, opened(c_dir) as c:
        ingest(a, "s", ["keep this", "the secret is 1234", "keep that"])
        export(a, tmp_path / "before.zst")
        import_(c, tmp_path / "before.zst")
        out, _ = a.run("forget", {"text": "secret is 1234", "confirm": True})
        assert out["reply"]["count"] == 1
        export(a, tmp_path / "after.zst")
        assert import_(b, tmp_path / "after.zst")["tombstones_applied"] == 1
        export(c, tmp_path / "c.zst")
        from_c = import_(b, tmp_path / "c.zst")
        assert (from_c["applied"], from_c["duplicates"]) == (0, 3)
        assert len(identities(b_dir)) == 2 and len(identities(c_dir)) == 3
        assert import_(c, tmp_path / "after.zst")["tombstones_applied"] == 0
        assert audit_passes(a) and audit_passes(b) and audit_passes(c)


def test_export_of_one_session_and_of_an_empty_store(source: Path, tmp_path: Path):
    with opened(source) as a:
        one = export(a, tmp_path / "beta.zst", session_id="beta")
        assert (one["turns"], one["tombstones"], one["sessions"]) == (5, 1, 1)
        with pytest.raises(InvalidInput, match="already exists"):
            export(a, tmp_path / "beta.zst")
    with opened(tmp_path / "empty") as e:
        assert export(e, tmp_path / "empty.zst")["turns"] == 0
    with opened(tmp_path / "b") as b:
        assert import_(b, tmp_path / "beta.zst")["applied"] == 5
        assert import_(b, tmp_path / "empty.zst")["applied"] == 0
        assert audit_passes(b)


# --- damaged, truncated, foreign and wrong-version bundles ---------------------------------------

def _lines(bundle: Path) -> list[bytes]:
    with bundle.open("rb") as fh:
        return zstandard.ZstdDecompressor().stream_reader(fh).read().splitlines(keepends=True)


def _write(bundle: Path, lines: list[bytes]) -> None:
    bundle.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(b"".join(lines)))


def truncated(bundle: Path) -> None:
    data = bundle.read_bytes()
    bundle.write_bytes(data[: len(data) * 2 // 3])


def bit_flipped(bundle: Path) -> None:
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x10
    bundle.write_bytes(bytes(data))


def wrong_version(bundle: Path) -> None:
    lines = _lines(bundle)
    head = json.loads(lines[0])
    lines[0] = (json.dumps({**head, "version": 2}) + "\n").encode()
    _write(bundle, lines)


def newer_schema(bundle: Path) -> None:
    lines = _lines(bundle)
    head = json.loads(lines[0])
    lines[0] = (json.dumps({**head, "schema_version": 999}) + "\n").encode()
    _write(bundle, lines)


def edited_content(bundle: Path) -> None:
    """Valid zstd, but one turn's text changed: its chain hash no longer follows."""
    lines = _lines(bundle)
    rec = json.loads(lines[3])
    lines[3] = (json.dumps({**rec, "content": rec["content"] + "!"}) + "\n").encode()
    _write(bundle, lines)


def wrong_content_hash(bundle: Path) -> None:
    """A turn that claims a content hash its content does not have."""
    lines = _lines(bundle)
    rec = json.loads(lines[3])
    lines[3] = (json.dumps({**rec, "content_hash": "ab" * 32}) + "\n").encode()
    _write(bundle, lines)


def dropped_record(bundle: Path) -> None:
    """A whole record removed from the middle (recompressed cleanly)."""
    lines = _lines(bundle)
    del lines[5]
    _write(bundle, lines)


def no_manifest(bundle: Path) -> None:
    _write(bundle, _lines(bundle)[:-1])


def foreign_zstd(bundle: Path) -> None:
    _write(bundle, [b'{"hello": "world"}\n', b'{"t": "turn"}\n'])


def not_zstd(bundle: Path) -> None:
    bundle.write_bytes(b"role,content\nuser,hello\n")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncated, "truncated|not a readable zstd"),
    "bit-flipped": (bit_flipped, "not a readable zstd|damaged|checksum"),
    "wrong-version": (wrong_version, "format version 2; this build reads version 1"),
    "newer-schema": (newer_schema, "schema version 999"),
    "edited-content": (edited_content, "chain hash does not follow"),
    "wrong-content-hash": (wrong_content_hash, "does not match its content hash"),
    "dropped-record": (dropped_record, "record before it|a record missing"),
    "no-manifest": (no_manifest, "no manifest"),
    "foreign-zstd": (foreign_zstd, "not an Omega Stenographer bundle"),
    "not-zstd": (not_zstd, "not a readable zstd bundle"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_bundle_is_refused_and_nothing_is_applied(
        source: Path, tmp_path: Path, damage: str):
    bundle = tmp_path / "a.zst"
    with opened(source) as a:
        export(a, bundle)
    spoil, message = DAMAGE[damage]
    spoil(bundle)
    b_dir = tmp_path / "b"
    with opened(b_dir, turn_limit=TURN_LIMIT) as b:
        ingest(b, "alpha", ["B's own turn."])
        before = snapshot(b_dir)
        with pytest.raises(InvalidInput, match=message) as refused:
            import_(b, bundle)
        assert refused.value.node == "verify"  # the first check after the request's
        assert snapshot(b_dir) == before
        assert audit_passes(b)
