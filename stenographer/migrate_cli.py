"""`stenographer migrate`: copy the whole store to SQLite or PostgreSQL, then audit it.

The command opens both stores and runs the ``migrate`` graph once: it copies page after
page until the copy is done, then audits the target. Each page commits with the copy's
progress in the target, so a killed process or a lost connection loses at most the page
in flight: the same command resumes where it stopped.

Ctrl-C (SIGINT) or SIGTERM sets the run's stop flag: the page in flight commits and the
graph's plan stage stops before the next. An exception thrown into the middle of a
transaction could leave it open (a Ctrl-C between its BEGIN and its ``with`` block) and
hang the stores' closing. A second one ends the process at once; the database rolls the
page back, as after SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nodes.evaluate_contracts.requests import MigrateRequest, parsed
from nodes.publish.wording import counted
from stenographer.options import add_options, request_of

__all__ = ["add_migrate_command", "store_address"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

DESCRIPTION = """\
Copy every table of a store into another one: a new SQLite file, or an empty
PostgreSQL database (and back). Ids are kept, so every brief's sources, milestone and
GraphRAG citation stays valid; every turn's content hash and chain hash is verified as
it is copied; the keyword index is rebuilt in the target's form and the vectors are
copied. Copies in pages (--batch turns; other tables 4x as many rows), each committed
with the copy's progress in the target: after Ctrl-C or a crash, run the same command
again and it resumes without duplicates. A target that holds records of its own, or a
copy of another store, is refused untouched. Then the contract audit runs on the target.

Stop the servers that write the source first: what they change during the copy may
be missed. Exit code 0: copied and the audit passed; 1: copied, the audit found
violations; 2: refused, or the copy or the audit could not run."""


def store_address(value: str) -> tuple[Path | None, str | None]:
    """(SQLite file, None) or (None, PostgreSQL URL) for --from/--to; a directory means
    the ``steno.db`` inside it."""
    from store.backend import is_postgres_url

    if is_postgres_url(value):
        return None, value
    path = Path(value).expanduser().absolute()
    return (path / "steno.db" if path.is_dir() else path), None


def _open(value: str | None, settings: Any, *, create: bool) -> Any:
    from stenographer.commands import CliError
    from stenographer.settings import reveal
    from store.backend import open_store

    if value is None:
        path, url = settings.db_path, reveal(settings.database_url)
        path = Path(path).absolute()
    else:
        path, url = store_address(value)
    if url is not None:
        return open_store(settings.db_path, database_url=url, vector_dim=settings.vector_dim)
    assert path is not None
    if not create and not path.is_file():
        raise CliError(f"there is no store at {path} to copy from")
    return open_store(path, synchronous=settings.synchronous, vector_dim=settings.vector_dim)


@contextmanager
def _stop_between_pages() -> Iterator[threading.Event]:
    """An event set by the first SIGINT/SIGTERM; the second exits at once."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if stop.is_set():
            os._exit(128 + signum)
        stop.set()
        print("\nstenographer: stopping after the page in flight (again to stop now)",
              file=sys.stderr, flush=True)

    previous = {s: signal.signal(s, on_signal) for s in _STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _rate(turns: int, seconds: float) -> float:
    return turns / seconds if seconds > 0 else 0.0


def cmd_migrate(args: argparse.Namespace) -> int:
    from stenographer.app import graphs as compiled
    from stenographer.progress import Progress
    from stenographer.settings import Settings

    request = request_of(args, MigrateRequest)
    parsed(MigrateRequest, request)  # bad input is refused before a target is created
    settings = Settings.from_env()
    source = _open(args.source, settings, create=False)
    try:
        target = _open(args.to, settings, create=True)
    except BaseException:
        source.close()
        raise
    from nodes.context import RunContext

    graphs = compiled()
    started, turns, seconds = time.monotonic(), 0, 0.0
    copy: dict[str, Any] | None = None  # the copy's summary, as soon as the graph has it
    audit: dict[str, Any] | None = None
    audit_error: str | None = None
    try:
        with _stop_between_pages() as stop, \
                Progress(f"migrate to {target.location}", unit="turns") as progress:

            def observe(stage: dict[str, Any], writes: dict[str, Any]) -> None:
                # Progress only: the copy's pages and its summary as the stages write
                # them (the summary before the audit, which may fail on its own).
                nonlocal turns, copy, seconds
                if "written" in writes:  # a page was copied
                    written = writes["written"]
                    progress.total = writes["progress"]["total"].get("exchanges") or None
                    progress.advance(written["turns"], label=f"migrate: {written['table']}")
                    turns += written["turns"]
                elif "migrated" in writes:
                    copy = writes["migrated"]
                    seconds = time.monotonic() - started
                    if copy["done"]:
                        progress.total, progress.label = None, "audit of the target"

            ctx = RunContext(store=target, settings=settings, source=source, stop=stop)
            try:
                out, _ = graphs.run("migrate", {"request": request}, ctx, observe)
                audit = out["reply"]["audit"]
            except Exception as ex:
                if copy is None or not copy["done"]:
                    raise
                audit_error = f"{type(ex).__name__}: {ex}"  # the copy stands
        assert copy is not None
        if not copy["done"]:
            print(f"stenographer: interrupted after {counted(turns, 'turn')}; run the same "
                  "command again to resume where it stopped", file=sys.stderr)
            return EXIT_INTERRUPTED
    finally:
        target.close()
        source.close()
    result = {"source": copy["source"], "target": copy["target"],
              "resumed": copy["resumed"], "copied": copy["copied"], "total": copy["total"],
              "turns_this_run": turns, "seconds": round(seconds, 3),
              "turns_per_second": round(_rate(turns, seconds), 1),
              "audit": audit, "audit_error": audit_error}
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(_text(result, copy))
    if audit_error is not None:
        return EXIT_ERROR
    return EXIT_OK if audit is not None and audit["passed"] else EXIT_EMPTY


def _text(result: dict[str, Any], copy: dict[str, Any]) -> str:
    copied = result["copied"]
    others = sum(n for table, n in copied.items() if table not in ("exchanges", "briefs"))
    if copy["table"] is None and not result["turns_this_run"] and copy["resumed"]:
        head = (f"{result['target']} already holds a complete copy of {result['source']}; "
                "nothing to copy.")
    else:
        head = (f"Copied {counted(copied.get('exchanges', 0), 'turn')}, "
                f"{counted(copied.get('briefs', 0), 'brief')} and "
                f"{counted(others, 'other row')} from {result['source']} to "
                f"{result['target']}" + (" (resumed)" if copy["resumed"] else "")
                + f": {counted(result['turns_this_run'], 'turn')} in "
                f"{result['seconds']:.1f} s "
                f"({result['turns_per_second']:,.0f} turns/s); content and chain hashes "
                "verified.")
    if result["audit_error"] is not None:
        return (f"{head}\nThe audit of the target could not run: {result['audit_error']}")
    return f"{head}\nAudit of the target:\n{result['audit']['text']}"


def add_migrate_command(sub: Any, make: Any) -> None:
    """Register `migrate` (``make`` is cli._sub)."""
    p = make(sub, "migrate", "copy the whole store to a SQLite file or PostgreSQL database",
             cmd_migrate, json_flag=True, description=DESCRIPTION)
    add_options(p, MigrateRequest, names={"source": "--from"},
                metavars={"to": "URL_OR_PATH", "source": "URL_OR_PATH"})
