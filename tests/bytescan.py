"""Where a text is still held in a directory: every byte of every file, read raw and
through every compressed stream found in it, case-insensitively.

A compressed value is found by its magic bytes wherever it starts: zstd frames (also
with each of the stored traces' dictionaries, which raw-content frames need), zlib and gzip
streams; what they decompress to is searched too, and decompressed once more.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import zstandard

from store.trace_dictionary import TRACE_DICTIONARY_V1, TRACE_DICTIONARY_V2

__all__ = ["places_holding"]

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZLIB_HEADERS = (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")
GZIP_MAGIC = b"\x1f\x8b\x08"
MAX_OUTPUT = 64 << 20  # a bogus header never makes a decompressor allocate more

_ZSTD = (zstandard.ZstdDecompressor(), *(
    zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(
        raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT))
    for raw in (TRACE_DICTIONARY_V1, TRACE_DICTIONARY_V2)))


def _offsets(data: bytes, magic: bytes) -> Iterator[int]:
    at = data.find(magic)
    while at >= 0:
        yield at
        at = data.find(magic, at + 1)


def _streams(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(kind@offset, decompressed bytes) of every stream that decompresses."""
    view = memoryview(data)
    for at in _offsets(data, ZSTD_MAGIC):
        for number, decompressor in enumerate(_ZSTD):
            try:
                out = decompressor.decompressobj().decompress(view[at:])
            except zstandard.ZstdError:
                continue
            if out:
                yield f"zstd{'+dict' if number else ''}@{at}", out
    starts = [(at, zlib.MAX_WBITS) for header in ZLIB_HEADERS for at in _offsets(data, header)]
    starts += [(at, 16 + zlib.MAX_WBITS) for at in _offsets(data, GZIP_MAGIC)]
    for at, wbits in starts:
        try:
            out = zlib.decompressobj(wbits).decompress(view[at:], MAX_OUTPUT)
        except zlib.error:
            continue
        if out:
            yield f"{'gzip' if wbits > zlib.MAX_WBITS else 'zlib'}@{at}", out


def _holding(data: bytes, needle: bytes, where: str, depth: int) -> Iterator[str]:
    if needle in data.lower():
        yield where
    if depth:
        for kind, out in _streams(data):
            yield from _holding(out, needle, f"{where} {kind}", depth - 1)


def places_holding(directory: Path, text: str) -> list[str]:
    """Every file (and compressed stream inside one) under ``directory`` that holds
    ``text`` in any letter case; [] when none does."""
    needle = text.lower().encode()
    found: list[str] = []
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            found += _holding(path.read_bytes(), needle, str(path.relative_to(directory)), 2)
    return found
