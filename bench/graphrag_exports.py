"""Byte-identity check for GraphRAG extraction: export the graph of a generated corpus.

Run from the repository root::

    python bench/graphrag_exports.py OUT_DIR [--turns 2000] [--batch-size 300]

Writes ``OUT_DIR/graph.graphml`` and ``OUT_DIR/graph.json`` (exported by the real CLI,
`stenographer graphrag export`, in a subprocess) for ``--turns`` turns of
``bench/ingest_query.py``'s generator extracted in batches of ``--batch-size`` (several
batches, so the incremental path is exercised), and prints each file's SHA-256. Compare
two runs with ``cmp`` (or the hashes) to show a change left the output byte-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.graphrag import load_corpus  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--batch-size", type=int, default=300)
    args = parser.parse_args(argv)
    from stenographer.app import open_app
    from stenographer.settings import Settings

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        app = open_app(Settings(data_dir=Path(tmp), turn_limit=1_000_000))
        try:
            load_corpus(app, args.turns)
        finally:
            app.close()
        env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": tmp}
        cli = [sys.executable, "-c", "from stenographer.cli import main; main()", "graphrag"]
        subprocess.run([*cli, "extract", "--batch-size", str(args.batch_size)], env=env,
                       check=True, stdout=subprocess.DEVNULL, cwd=REPO_ROOT)
        for fmt in ("graphml", "json"):
            path = args.out / f"graph.{fmt}"
            subprocess.run([*cli, "export", "--format", fmt, "--output", str(path)],
                           env=env, check=True, stderr=subprocess.DEVNULL, cwd=REPO_ROOT)
            print(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
