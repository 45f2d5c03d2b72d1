"""Transcript files as Claude Code and Codex CLI write them, for the capture tests.

The shapes follow the hosts' real files: Claude Code records with type, uuid,
parentUuid, sessionId, timestamp and message {role, content} (a string or blocks),
among summary / system / file-history-snapshot records; Codex rollout records
{timestamp, type, payload} with session_meta, response_item messages (input_text /
output_text blocks), reasoning, function calls, event_msg and turn_context.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CLAUDE_SESSION = "5b0e6f0c-6a51-4a5e-9d7f-0c2f7b1d9a11"
CODEX_SESSION = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"


def ts(n: int) -> str:
    """The ``n``-th second after 2026-11-30 10:00:00 UTC, as the hosts write it (a valid
    time for any ``n``: a long transcript runs on into the next hours and days)."""
    moment = datetime(2026, 11, 30, 10, tzinfo=UTC) + timedelta(seconds=n)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.123Z")


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


@dataclass
class ClaudeTranscript:
    """~/.claude/projects/<project>/<session>.jsonl"""

    root: Path
    session: str = CLAUDE_SESSION
    project: str = "-home-me-work-app"
    cwd: str = "/home/me/work/app"
    n: int = 0
    last: str | None = None
    said: list[tuple[str, str]] = field(default_factory=list)  # the turns to be captured

    @property
    def path(self) -> Path:
        return self.root / self.project / f"{self.session}.jsonl"

    def _record(self, kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        self.n += 1
        rec = {"parentUuid": self.last, "isSidechain": False, "userType": "external",
               "cwd": self.cwd, "sessionId": self.session, "version": "2.0.31",
               "gitBranch": "main", "type": kind, "message": message,
               "uuid": str(uuid.uuid4()), "timestamp": ts(self.n), **extra}
        self.last = rec["uuid"]
        return rec

    def user(self, text: str) -> str:
        self.said.append(("user", text))
        return line(self._record("user", {"role": "user", "content": text}))

    def assistant(self, text: str) -> str:
        """An assistant text block (Claude Code writes one record per content block)."""
        self.said.append(("assistant", text))
        return line(self._record("assistant", {
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": text}], "stop_reason": None}))

    def noise(self) -> str:
        """Records that are not turns: thinking, a tool call and its result, meta."""
        tool_id = f"toolu_{self.n}"
        return "".join([
            line({"type": "summary", "summary": "Queue choice", "leafUuid": str(uuid.uuid4())}),
            line(self._record("assistant", {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "weigh it", "signature": "x"}]})),
            line(self._record("assistant", {"role": "assistant", "content": [
                {"type": "tool_use", "id": tool_id, "name": "Bash",
                 "input": {"command": "ls"}}]})),
            line(self._record("user", {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "a.py b.py"}]})),
            line(self._record("user", {"role": "user", "content": "<local-command-caveat>"},
                              isMeta=True)),
            line({"type": "system", "subtype": "turn_duration", "durationMs": 1234,
                  "timestamp": ts(self.n), "uuid": str(uuid.uuid4())}),
            line({"type": "file-history-snapshot", "messageId": str(uuid.uuid4()),
                  "snapshot": {"trackedFileBackups": {}}}),
        ])

    def append(self, *chunks: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write("".join(chunks))


@dataclass
class CodexTranscript:
    """~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session>.jsonl"""

    root: Path
    session: str = CODEX_SESSION
    n: int = 0
    said: list[tuple[str, str]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return (self.root / "2026" / "11" / "30"
                / f"rollout-2026-11-30T10-00-00-{self.session}.jsonl")

    def _rec(self, kind: str, payload: dict[str, Any]) -> str:
        self.n += 1
        return line({"timestamp": ts(self.n), "type": kind, "payload": payload})

    def meta(self) -> str:
        return self._rec("session_meta", {
            "id": self.session, "timestamp": ts(0), "cwd": "/home/me/work/app",
            "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": None,
            "source": "cli", "git": {"branch": "main"}}) + self._rec("response_item", {
                "type": "message", "role": "user", "content": [
                    {"type": "input_text",
                     "text": "<environment_context>\n  <cwd>/home/me</cwd>\n"
                             "</environment_context>"}]})

    def user(self, text: str) -> str:
        self.said.append(("user", text))
        return (self._rec("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": text}]})
            + self._rec("event_msg", {"type": "user_message", "message": text,
                                      "kind": "plain"}))

    def assistant(self, text: str) -> str:
        self.said.append(("assistant", text))
        return (self._rec("response_item", {"type": "message", "role": "assistant",
                                            "content": [{"type": "output_text", "text": text}]})
                + self._rec("event_msg", {"type": "agent_message", "message": text}))

    def noise(self) -> str:
        return "".join([
            self._rec("turn_context", {"cwd": "/home/me", "approval_policy": "on-request",
                                       "model": "gpt-5-codex", "summary": "auto"}),
            self._rec("response_item", {"type": "reasoning", "summary": [
                {"type": "summary_text", "text": "**Looking**"}], "encrypted_content": "gAAA"}),
            self._rec("response_item", {"type": "function_call", "name": "shell",
                                        "arguments": "{\"command\":[\"ls\"]}",
                                        "call_id": "call_1"}),
            self._rec("response_item", {"type": "function_call_output", "call_id": "call_1",
                                        "output": "{\"output\":\"a.py\"}"}),
            self._rec("event_msg", {"type": "token_count", "info": None}),
        ])

    def append(self, *chunks: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write("".join(chunks))
