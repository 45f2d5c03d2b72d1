"""The hashed vectors as sqlite-vec's vec0 table stores them, read chunk by chunk.

An empty in-memory copy of the hashed vectors (``store.vectors.VectorCache``) is
filled from here in one pass instead of a point lookup per row.
"""

from __future__ import annotations

import apsw
import numpy as np
import numpy.typing as npt

from store.sql import Conn, all_rows

__all__ = ["Block", "vec0_chunks"]

# A cold copy of a large store is read from vec0's own chunk tables (sqlite-vec 0.1.x:
# per chunk of ``size`` slots a validity bitmap, the rowids as int64, the vectors
# back to back and an int64 metadata column), ~1,000 rows for a million vectors where
# the row-by-row read (``store.vectors.SELECT_NEW``) makes a million point lookups
# (~30 s). Any shape that differs from that layout, a count that differs from vec0's
# own, or a sampled row that differs from vec0's answer for it falls back to the
# row-by-row read.
SELECT_CHUNKS = """
SELECT c.size, c.validity, c.rowids, v.vectors, m.data
FROM exchange_vectors_chunks c
JOIN exchange_vectors_vector_chunks00 v ON v.rowid = c.chunk_id
JOIN exchange_vectors_metadatachunks00 m ON m.rowid = c.chunk_id
ORDER BY c.chunk_id"""
COUNT_VECTORS = "SELECT count(*) FROM exchange_vectors_rowids"
SELECT_ONE = "SELECT session_id, embedding FROM exchange_vectors WHERE rowid = ?"

Block = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int8]]


def vec0_chunks(conn: Conn) -> Block | None:
    """Every stored hashed vector as (exchange ids ascending, session ids, int8 rows),
    read chunk by chunk from vec0's tables; None when their layout is not the known one.
    The rows are laid out component-major (their transpose is C-contiguous), the layout
    of the in-memory copy, which then takes them as they are.

    The chunks are read one at a time into arrays of the counted size (the rows of a
    million vectors are held once, not once per step of the read), and not through the
    store's memory map: every page read through it would stay resident in the process
    beside the copy made of it (measured: ~250 bytes a vector, 5 MB at 20,000 turns)."""
    mapped = int(all_rows(conn, "PRAGMA mmap_size")[0][0])
    conn.execute("PRAGMA mmap_size = 0")
    try:
        return _read_chunks(conn)
    finally:
        conn.execute(f"PRAGMA mmap_size = {mapped}")


def _read_chunks(conn: Conn) -> Block | None:
    try:
        expected = int(all_rows(conn, COUNT_VECTORS)[0][0])
        if not expected:
            return None
        ids = np.empty(expected, dtype=np.int64)
        sessions = np.empty(expected, dtype=np.int64)
        vectors: npt.NDArray[np.int8] | None = None
        at = 0
        for size, validity, rowids, blob, metadata in conn.execute(SELECT_CHUNKS):
            size = int(size)
            if size <= 0 or len(blob) % size or len(rowids) != 8 * size \
                    or len(metadata) != 8 * size or len(validity) * 8 < size:
                return None
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8),
                                  bitorder="little")[:size].astype(bool)
            count = int(valid.sum())
            rows = np.frombuffer(blob, dtype=np.int8).reshape(size, -1)
            if vectors is None:  # component-major, as the copy holds them (module doc)
                vectors = np.empty((rows.shape[1], expected), dtype=np.int8).T
            if at + count > expected or rows.shape[1] != vectors.shape[1]:
                return None
            ids[at : at + count] = np.frombuffer(rowids, dtype=np.int64)[valid]
            sessions[at : at + count] = np.frombuffer(metadata, dtype=np.int64)[valid]
            vectors[at : at + count] = rows[valid]
            at += count
    except apsw.SQLError:  # another sqlite-vec layout: use the SQL path
        return None
    if vectors is None or at != expected:
        return None
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():  # chunks filled out of order
        order = np.argsort(ids, kind="stable")
        ids, sessions, vectors = ids[order], sessions[order], vectors[order]
    for at in (0, len(ids) // 2, len(ids) - 1):  # vec0 itself agrees on samples
        row = all_rows(conn, SELECT_ONE, (int(ids[at]),))
        if not row or int(row[0][0]) != int(sessions[at]) \
                or bytes(row[0][1]) != vectors[at].tobytes():
            return None
    return ids, sessions, vectors
