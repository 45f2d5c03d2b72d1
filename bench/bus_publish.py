"""Publishing turns to the coordination bus: throughput of draining
the bus outbox, per batch size, into a bus that already holds ``--events`` events of
other tools (the bus has no index we could use: each batch's key check scans them).

The store is filled through the store layer (bench/sync.py ``fill``: real content,
chain hashes, decisions). Each case publishes every turn with ``stenographer.bus.publish``
(the same graph runs as the server's background publisher), then once more with the
cursor reset to 0 (a publisher that lost its cursor: every key is found on the bus,
nothing is inserted), on a fresh bus file per case.

    python bench/bus_publish.py [--turns 20000] [--events 20000] [--batches 50,200,1000]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bus import fill as fill_bus
from bench.common import print_table
from bench.sync import fill as fill_store
from tests.busfile import make_bus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batches", default="50,200,1000")
    args = parser.parse_args()

    from stenographer.app import open_app
    from stenographer.bus import publish
    from stenographer.settings import Settings

    root = Path(tempfile.mkdtemp(prefix="bench-bus-publish-"))
    try:
        data = root / "data"
        _, fill_s = fill_store(data, args.turns)
        print(f"{args.turns:,} turns stored in {fill_s:.1f} s; bus holds {args.events:,} "
              "events of other tools")
        rows = []
        for batch in (int(b) for b in args.batches.split(",")):
            shared = root / f"shared-{batch}"
            fill_bus(make_bus(shared), args.events)
            app = open_app(Settings(data_dir=data, shared_dir=shared, bus_batch=batch))
            try:
                started = time.perf_counter()
                first = publish(app)
                first_s = time.perf_counter() - started
                with app.store.write() as conn:
                    conn.execute("DELETE FROM cursors WHERE kind = 'outbox:bus'")
                started = time.perf_counter()
                again = publish(app)
                again_s = time.perf_counter() - started
            finally:
                app.close()
            assert first.ok and first.published == args.turns, first
            assert again.ok and again.published == 0 and again.duplicates == args.turns
            rows.append((batch, first.batches, f"{first_s:.2f}",
                         f"{args.turns / first_s:,.0f}", f"{first_s / first.batches * 1e3:.1f}",
                         f"{again_s:.2f}", f"{args.turns / again_s:,.0f}"))
        print_table(["batch", "batches", "publish s", "events/s", "ms/batch",
                     "re-check s", "re-checked/s"], rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
