"""The `stenographer capture` and `stenographer hook` commands."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from nodes.extract.transcripts import CLAUDE_CODE, KINDS
from stenographer.argtypes import ranged
from stenographer.capture import (
    HOOK_HOSTS,
    Capturer,
    PassReport,
    discover,
    hook_payload,
    hook_targets,
)
from stenographer.settings import Settings
from store.capture_lock import CaptureLock, CaptureLocked

__all__ = ["add_capture_commands", "cmd_capture", "cmd_hook"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2
HOOK_FAILED = 1  # hosts treat it as a non-blocking error (2 would make Claude Code act on it)
HOOK_LOCK_WAIT = 10.0  # seconds a hook waits for a one-off pass that holds the lock


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    changes: dict[str, Any] = {}
    if args.claude_dir:
        changes["capture_claude_dir"] = Path(args.claude_dir).expanduser().absolute()
    if args.codex_dir:
        changes["capture_codex_dir"] = Path(args.codex_dir).expanduser().absolute()
    if args.only:
        changes["capture_sources"] = tuple(dict.fromkeys(args.only))
    if args.interval is not None:
        changes["capture_interval"] = args.interval
    return dataclasses.replace(settings, **changes)


def _emit(report: PassReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False), flush=True)
    else:
        print(report.text(), flush=True)


def cmd_capture(args: argparse.Namespace) -> int:
    from stenographer.app import open_app

    settings = _settings(args)
    kinds, claude, codex = (settings.capture_sources, settings.capture_claude_dir,
                            settings.capture_codex_dir)

    def find() -> list[tuple[str, Path]]:
        return discover(kinds, claude, codex)

    with CaptureLock(settings.data_dir, "watch" if args.watch else "once"):
        app = open_app(settings)
        try:
            stop = threading.Event()
            capturer = Capturer(app, stop=stop)
            if args.once:
                sources = find()
                report = capturer.run_pass(sources)
                _emit(report, args.json)
                if report.errors:
                    return EXIT_ERROR
                return EXIT_OK if sources else EXIT_EMPTY
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            print(f"stenographer capture: watching {', '.join(kinds)} transcripts under "
                  f"{claude} and {codex} every {settings.capture_interval:g} s "
                  "(Ctrl-C stops)", file=sys.stderr, flush=True)
            capturer.watch(find, settings.capture_interval, lambda r: _emit(r, args.json))
            return EXIT_OK
        finally:
            app.close()


def cmd_hook(args: argparse.Namespace) -> int:
    """Never fails the host: errors go to stderr with exit 1 (non-blocking for hosts)."""
    words = list(args.words)
    host = words.pop(0) if words and words[0] in HOOK_HOSTS else CLAUDE_CODE
    if len(words) > 1:
        print("stenographer hook: usage: stenographer hook [claude-code|codex] [PAYLOAD]",
              file=sys.stderr)
        return HOOK_FAILED
    try:
        from stenographer.app import open_app

        settings = Settings.from_env()
        targets = hook_targets(host, hook_payload(words[0] if words else None), settings)
        with CaptureLock(settings.data_dir, "hook", wait=HOOK_LOCK_WAIT):
            app = open_app(settings)
            try:
                report = Capturer(app).run_pass(targets)
            finally:
                app.close()
    except CaptureLocked as ex:
        if (ex.holder or {}).get("mode") == "watch":
            return EXIT_OK  # the store's watcher captures these transcripts already
        print(f"stenographer hook: {ex}", file=sys.stderr)
        return HOOK_FAILED
    except Exception as ex:  # a hook must never break the host's turn
        print(f"stenographer hook: {type(ex).__name__}: {ex}", file=sys.stderr)
        return HOOK_FAILED
    if args.verbose or report.errors:
        print(report.text(), file=sys.stderr)
    return HOOK_FAILED if report.errors else EXIT_OK


def add_capture_commands(sub: Any, add: Any) -> None:
    """Register `capture` and `hook` (``add`` is cli._sub)."""
    p = add(sub, "capture", "capture Claude Code and Codex CLI transcripts into the store",
            cmd_capture, json_flag=True, description=(
                "Read the JSONL transcripts that Claude Code (~/.claude/projects) and Codex "
                "CLI (~/.codex/sessions) write and record their user and assistant messages, "
                "each once (a source key per record; a cursor per file). --once reads what "
                "is new and exits (exit 1: no transcript found); --watch keeps following "
                "them until stopped. One capture process per store: a second one is refused "
                "(exit 2). Settings: STENO_CAPTURE_CLAUDE_DIR, STENO_CAPTURE_CODEX_DIR, "
                "STENO_CAPTURE_SOURCES, STENO_CAPTURE_INTERVAL."))
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true", help="one pass, then exit")
    mode.add_argument("--watch", action="store_true", help="follow the files until stopped")
    p.add_argument("--claude-dir", help="Claude Code projects directory "
                                        "(default ~/.claude/projects)")
    p.add_argument("--codex-dir", help="Codex sessions directory (default ~/.codex/sessions)")
    p.add_argument("--only", action="append", choices=KINDS,
                   help="follow only this host's transcripts (repeatable)")
    p.add_argument("--interval", type=ranged(float, 0.05, 3_600, "seconds"),
                   help="seconds between looks with --watch (default STENO_CAPTURE_INTERVAL, 1)")

    p = add(sub, "hook", "capture the transcript a host's hook names (Claude Code, Codex)",
            cmd_hook, description=(
                "For a host's hook: Claude Code (Stop / UserPromptSubmit hooks, JSON on "
                "stdin with transcript_path): `stenographer hook claude-code`; Codex CLI "
                "(config.toml: notify = [\"stenographer\", \"hook\", \"codex\"], JSON as "
                "the last argument). Captures what is new in that transcript and prints "
                "nothing on success; errors go to stderr with exit 1, never 2, so the host "
                "goes on. When a capture watcher runs on the store it does nothing."))
    p.add_argument("words", nargs="*", metavar="[claude-code|codex] [PAYLOAD]")
    p.add_argument("--verbose", action="store_true", help="print the pass summary on stderr")
