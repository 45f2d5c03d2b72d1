"""Never-crash properties of reading a bundle (Hypothesis): whatever the bytes, a bundle
is accepted or refused with a BundleError that says why; nothing else escapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nodes.bundles import BundleError, verify_bundle
from store.migrations import SCHEMA_VERSION
from tests.sync.support import ingest, opened

MAX_LINE = 1 << 20


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    root = tmp_path_factory.mktemp("bundle")
    with opened(root / "a") as app:
        ingest(app, "p", ["first turn", "second turn, with a decision: we chose zstd"])
        ingest(app, "q", ["another session"])
        app.run("sync_export", {"path": str(root / "a.zst")})
    with (root / "a.zst").open("rb") as fh:
        data = zstandard.ZstdDecompressor().stream_reader(fh).read()
    return data.splitlines(keepends=True)


def check(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        verify_bundle(path, max_line=MAX_LINE, schema_version=SCHEMA_VERSION)
    except BundleError as ex:
        assert str(ex)


settings_ = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings_
@given(data=st.binary(max_size=2_000))
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes):
    check(tmp_path / "x.zst", data)
    check(tmp_path / "y.zst", zstandard.ZstdCompressor().compress(data))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=10)


@settings_
@example(index=1, key="created_at", value=10**400)  # beyond a float
@example(index=1, key="created_at", value=float("nan"))
@given(index=st.integers(min_value=0, max_value=10), key=st.sampled_from(
    ["t", "id", "session", "role", "created_at", "content", "chain", "prev", "origin",
     "source_key", "trace_id", "content_hash", "version", "schema_version", "turns",
     "sessions", "sha256", "through"]), value=JSON_VALUES)
def test_any_field_set_to_any_json_value_never_crashes(tmp_path: Path, lines: list[bytes],
                                                       index: int, key: str, value: object):
    edited = list(lines)
    i = index % len(edited)
    rec = json.loads(edited[i])
    rec[key] = value
    edited[i] = (json.dumps(rec) + "\n").encode()
    check(tmp_path / "z.zst", zstandard.ZstdCompressor().compress(b"".join(edited)))


@settings_
@given(cut=st.integers(min_value=0), junk=st.binary(max_size=64))
def test_cut_or_spliced_records_never_crash(tmp_path: Path, lines: list[bytes], cut: int,
                                            junk: bytes):
    data = b"".join(lines)
    at = cut % (len(data) + 1)
    check(tmp_path / "c.zst", zstandard.ZstdCompressor().compress(data[:at] + junk + data[at:]))
    check(tmp_path / "d.zst", zstandard.ZstdCompressor().compress(b"[" * 100_000 + b"\n"))
