"""A forgotten turn's sync origin: its ``turn_origins`` row goes with it, the tombstone
keeps the origin, and an old bundle that still holds the turn does not bring it back —
here, nor at a store that receives the tombstone first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stenographer.app import App
from tests.sync.support import audit_passes, identities, ingest, opened, readonly


def export(app: App, path: Path) -> dict[str, Any]:
    out, _ = app.run("sync_export", {"path": str(path)})
    return dict(out["reply"])


def import_(app: App, path: Path) -> dict[str, Any]:
    out, _ = app.run("sync_import", {"path": str(path)})
    return dict(out["reply"])


SECRET = "the relinked secret is Tarn-0451"


def test_a_forgotten_relinked_turn_leaves_turn_origins_and_never_comes_back(tmp_path: Path):
    a_dir, b_dir, c_dir = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    with opened(a_dir) as a, opened(b_dir) as b:
        ingest(a, "s", ["shared start"])
        export(a, tmp_path / "base.zst")
        import_(b, tmp_path / "base.zst")
        ingest(a, "s", [SECRET, "A keeps writing"], start=10)
        ingest(b, "s", ["B wrote meanwhile"], start=20)
        export(a, tmp_path / "old.zst")  # the bundle that still holds the secret
        got = import_(b, tmp_path / "old.zst")
        assert (got["applied"], got["relinked"]) == (2, 2)  # forked: B re-links them
        conn = b.store.connection()
        victim, origin = conn.execute(
            "SELECT e.id, o.origin FROM exchanges e JOIN turn_origins o ON o.exchange_id = e.id "
            "WHERE instr(e.content, 'Tarn-0451')").fetchone()

        out, _ = b.run("forget", {"text": "Tarn-0451", "confirm": True})
        assert out["reply"]["ids"] == [victim]
        assert conn.execute("SELECT count(*) FROM turn_origins WHERE exchange_id = ?",
                            (victim,)).fetchone()[0] == 0
        assert conn.execute("SELECT origin FROM forgotten WHERE exchange_id = ?",
                            (victim,)).fetchone()[0] == origin
        # The old bundle again: every turn known, the forgotten one included.
        again = import_(b, tmp_path / "old.zst")
        assert again["applied"] == 0 and again["tombstones"] == 0
        assert not any("Tarn" in str(i) for i in identities(b_dir))
        assert conn.execute("SELECT count(*) FROM exchanges WHERE instr(content, "
                            "'Tarn-0451')").fetchone()[0] == 0
        assert audit_passes(b)
        # B's tombstone carries the origin: C, receiving it first, refuses A's old turn.
        export(b, tmp_path / "b.zst")
        with opened(c_dir) as c:
            assert import_(c, tmp_path / "b.zst")["tombstones_applied"] == 1
            assert import_(c, tmp_path / "old.zst")["applied"] == 0
            assert audit_passes(c)
        origins = readonly(c_dir).execute(
            "SELECT count(*) FROM turn_origins o JOIN forgotten f "
            "ON f.exchange_id = o.exchange_id").fetchone()[0]
        assert origins == 0  # a received tombstone keeps its origin itself
    assert not any("Tarn" in str(i) for i in identities(c_dir))
