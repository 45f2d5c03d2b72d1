"""The `stenographer capture` and `stenographer hook` commands."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, NoReturn

from nodes.extract.transcripts import CLAUDE_CODE, KINDS
from nodes.publish.wording import counted
from stenographer.argtypes import ranged
from stenographer.capture import (
    HOOK_HOSTS,
    Capturer,
    PassReport,
    discover,
    hook_event,
    hook_payload,
    hook_session,
    hook_targets,
    pass_request,
)
from stenographer.settings import Settings
from store.capture_lock import CaptureLock, CaptureLocked
from store.errors import InvalidInput, StenoError
from store.hook_log import record_hook

__all__ = ["add_capture_commands", "cmd_capture", "cmd_hook", "hook_exit", "hook_main"]

EXIT_OK, EXIT_EMPTY, EXIT_ERROR = 0, 1, 2
HOOK_LOCK_WAIT = 10.0  # seconds a hook waits for a one-off pass that holds the lock
HOOK_BUSY_MS = 2_000  # how long a hook's statement waits for another process's write


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
    return settings.replace(**changes)


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


def _hook(host: str, event: str, payload: dict[str, Any], settings: Settings,
          verbose: bool) -> str:
    """One run of the ``hook`` graph, whose first stage routes by the event: SessionStart
    prints the briefing the host adds to the new context (nothing when the store knows
    nothing to say); any other event (PreCompact, Stop, Codex notify...) captures what
    is new in the transcript the host names, so that every message is stored before the
    host summarises it. Returns what was done, for the hook log.

    What the run needs is set up here by event: a briefing only reads (no store yet: it
    is not created, and nothing runs), a capture holds the capture lock (a watcher on
    the store: capture is left to it, and nothing runs)."""
    from graphs.registry import build_graphs
    from nodes.evaluate_contracts.capture_input import BRIEFING_EVENT
    from stenographer.app import open_app

    briefing = event == BRIEFING_EVENT
    request: dict[str, Any] = {"event": event}
    lock: AbstractContextManager[Any]
    if briefing:
        session = hook_session(payload)
        if session is None:
            raise InvalidInput("the SessionStart payload names no session_id")
        if settings.database_url is None and not settings.db_path.exists():
            return "no store yet"  # nothing recorded anywhere; the store is not created here
        request.update(session_id=f"{host}:{session}", source=payload.get("source"),
                       cwd=payload.get("cwd"), max_chars=settings.briefing_chars)
        lock = nullcontext()
    else:
        request.update(pass_request(hook_targets(host, payload, settings)))
        lock = CaptureLock(settings.data_dir, "hook", wait=HOOK_LOCK_WAIT)
    try:
        with lock:
            app = open_app(settings, compiled=build_graphs(), busy_timeout_ms=HOOK_BUSY_MS)
            try:
                if not briefing:
                    with app.store.write():  # a store another process keeps locked fails
                        pass  # here, once, not at every statement (and trace) of the pass
                started = time.perf_counter()
                out, trace = app.run("hook", request)
                reply = out["reply"]
                if briefing and reply["briefing"]:
                    context = {"hookSpecificOutput": {"hookEventName": BRIEFING_EVENT,
                                                      "additionalContext": reply["briefing"]}}
                    sys.stdout.write(json.dumps(context) + "\n")
                    sys.stdout.flush()
            finally:
                app.close()  # the stage trace is written here
    except CaptureLocked as ex:
        if (ex.holder or {}).get("mode") == "watch":
            return "the capture watcher captures these transcripts"
        raise
    if briefing:
        text, scope = reply["briefing"], reply["scope"]
        return (f"{scope} briefing, {len(text)} characters, run {trace['run_id']}" if text
                else f"nothing to add ({scope}), run {trace['run_id']}")
    report = PassReport.of(reply, started)
    if verbose or report.errors:
        print(report.text(), file=sys.stderr)
    if report.errors:
        raise HookFailed(next(f.error for f in report.files if f.error) or "capture failed")
    return f"captured {counted(report.captured, 'turn')} from {counted(len(report.files), 'file')}"


class HookFailed(Exception):
    """A hook's work failed in a way the pass itself reported."""


def cmd_hook(args: argparse.Namespace) -> int:
    """Never fails the host: the exit code is 0 whatever happens, and stdout carries only
    what the host should add to the context (the SessionStart briefing). An error goes
    to stderr and to the hook log that `stenographer status` shows."""
    started = time.perf_counter()
    words = list(args.words)
    host = words.pop(0) if words and words[0] in HOOK_HOSTS else CLAUDE_CODE
    event, data_dir = "unknown", None
    try:
        settings = Settings.from_env()
        data_dir = settings.data_dir
        if len(words) > 1:
            raise InvalidInput("usage: stenographer hook [claude-code|codex] [PAYLOAD]")
        payload = hook_payload(words[0] if words else None)
        event = hook_event(payload)
        detail = _hook(host, event, payload, settings, args.verbose)
    except Exception as ex:  # a hook must never break the host's turn
        message = str(ex) if isinstance(ex, (StenoError, HookFailed)) else (
            f"{type(ex).__name__}: {ex}")
        print(f"stenographer hook ({host} {event}): {message}", file=sys.stderr)
        if data_dir is not None:
            record_hook(data_dir, host=host, event=event, ok=False,
                        duration_ms=(time.perf_counter() - started) * 1e3, error=message)
        return EXIT_OK
    record_hook(settings.data_dir, host=host, event=event, ok=True,
                duration_ms=(time.perf_counter() - started) * 1e3, detail=detail)
    return EXIT_OK


def _hook_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("words", nargs="*", metavar="[claude-code|codex] [PAYLOAD]")
    p.add_argument("--verbose", action="store_true", help="print the pass summary on stderr")


HOOK_DESCRIPTION = (
    "For a host's hooks. Claude Code (JSON on stdin): `stenographer hook claude-code` as "
    "the command of its PreCompact, SessionStart and Stop hooks (`stenographer config "
    "claude-code --hooks` prints the block). PreCompact and Stop capture what is new in "
    "the transcript the host names; SessionStart prints the briefing the host adds to "
    "the new context (after a compaction or on resume: the session's open blockers, "
    "milestones, decisions and the briefs matching its last requests; at startup: the "
    "previous sessions of the same directory; STENO_BRIEFING_CHARS). Codex CLI: the same "
    "with `stenographer hook codex` in hooks.json, or its notify program "
    "(config.toml: notify = [\"stenographer\", \"hook\", \"codex\"], JSON as the last "
    "argument). Always exits 0; an error goes to stderr and to `stenographer status`. "
    "When a capture watcher runs on the store, capture is left to it.")


def hook_exit(code: int) -> NoReturn:
    """End a hook's process at once, its output flushed. Its work is done and closed by
    then (store, trace, hook log, capture lock); the interpreter's own teardown of the
    graph engine's modules would cost ~0.1 s of CPU (measured on a loaded 2-core machine:
    0.37 s -> 0.27 s for importing the hook's modules and leaving)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def hook_main(argv: list[str]) -> int:
    """`stenographer hook ...` without building the other commands' parsers (a hook's
    host waits for it)."""
    from stenographer.commands import EPILOG

    p = argparse.ArgumentParser(prog="stenographer hook", description=HOOK_DESCRIPTION,
                                epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _hook_arguments(p)
    args, unknown = p.parse_known_args(argv)  # an unknown option must not exit 2 either:
    args.words += unknown  # cmd_hook reports it as bad usage and exits 0
    return cmd_hook(args)


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

    p = add(sub, "hook", "for a host's hooks: capture its transcript, brief a new session "
                         "(Claude Code, Codex)", cmd_hook, description=HOOK_DESCRIPTION)
    _hook_arguments(p)
