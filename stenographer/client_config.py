"""`stenographer config CLIENT`: a ready-to-paste MCP configuration for an MCP host.

Hosts start servers with a minimal environment, so everything is absolute: the
``omega-stenographer-mcp`` console script of the environment this interpreter runs in,
and ``OMEGA_STENOGRAPHER_DIR``. The JSON follows each host's documented shape:

- Claude Desktop, Cursor, Windsurf: ``{"mcpServers": {NAME: {command, args, env}}}``
- VS Code (``.vscode/mcp.json``): ``{"servers": {NAME: {"type": "stdio", command, args, env}}}``
- Claude Code: the project-scope ``.mcp.json`` file, ``{"mcpServers": {NAME: {"type":
  "stdio", command, args, env}}}``; the same entry also works with
  ``claude mcp add-json NAME '<entry>'`` (printed as a hint).

``stenographer config claude-code --hooks`` prints the hooks block of Claude Code's
``settings.json`` instead: ``PreCompact`` and ``Stop`` capture the transcript,
``SessionStart`` (matchers ``compact|resume`` and ``startup``) prints the briefing. Hook
commands run through the shell with the host's environment, so the command names the
data directory itself.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from stenographer import DISTRIBUTION

__all__ = [
    "CLIENTS",
    "DEFAULT_NAME",
    "DISTRIBUTION",
    "SERVER_SCRIPT",
    "Launch",
    "client_config",
    "hook_command",
    "hooks_config",
    "launch_command",
    "paste_hint",
]

SERVER_SCRIPT = "omega-stenographer-mcp"
CLI_SCRIPT = "stenographer"
# Seconds Claude Code gives each hook (its default is 60): a briefing answers in well
# under a second, a capture of a long transcript may take longer.
HOOK_TIMEOUTS = {"PreCompact": 120, "SessionStart": 15, "Stop": 60}
DEFAULT_NAME = "stenographer"
CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor", "windsurf")

_WHERE = {
    "claude-desktop": "Merge into claude_desktop_config.json (macOS: ~/Library/Application "
                      "Support/Claude/, Windows: %APPDATA%\\Claude\\; Settings → Developer → "
                      "Edit Config), then restart Claude Desktop.",
    "claude-code": "Save as .mcp.json in the project root (project scope), or add the entry "
                   "with: claude mcp add-json {name} '{entry}'",
    "vscode": "Save as .vscode/mcp.json in the workspace (or merge into your user "
              "configuration: Command Palette → 'MCP: Open User Configuration').",
    "cursor": "Merge into ~/.cursor/mcp.json (all projects) or .cursor/mcp.json (this "
              "project).",
    "windsurf": "Merge into ~/.codeium/windsurf/mcp_config.json, then refresh the MCP "
                "servers in Windsurf's settings.",
}


@dataclass(frozen=True)
class Launch:
    """How a host starts the stdio server."""

    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def entry(self, typed: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "stdio"} if typed else {}
        out.update(command=self.command, args=list(self.args), env=dict(self.env))
        return out


def _installed() -> bool:
    try:
        metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return False
    return True


def launch_command(data_dir: Path, executable: str | None = None) -> Launch:
    """The console script beside ``executable`` (default: this interpreter; its
    symlink is kept, because a venv's ``bin/python`` is what selects the venv).

    Without the script (running from a source checkout), the interpreter runs
    ``-m stenographer``, with ``PYTHONPATH`` set to the checkout when the package is
    not installed in that environment.
    """
    python = Path(executable or sys.executable).absolute()
    suffix = ".exe" if os.name == "nt" else ""
    script = python.parent / f"{SERVER_SCRIPT}{suffix}"
    env = {"OMEGA_STENOGRAPHER_DIR": str(data_dir.expanduser().absolute())}
    if script.is_file():
        return Launch(str(script), [], env)
    if not _installed():
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return Launch(str(python), ["-m", "stenographer"], env)


def hook_command(data_dir: Path, host: str = "claude-code", executable: str | None = None
                 ) -> str:
    """The shell command of a host's hook: ``stenographer hook HOST`` of this
    environment (the ``stenographer`` script beside ``executable``, else the interpreter
    with ``-m stenographer``), with ``OMEGA_STENOGRAPHER_DIR`` set in front."""
    python = Path(executable or sys.executable).absolute()
    suffix = ".exe" if os.name == "nt" else ""
    script = python.parent / f"{CLI_SCRIPT}{suffix}"
    words = [str(script)] if script.is_file() else [str(python), "-m", "stenographer"]
    env = {"OMEGA_STENOGRAPHER_DIR": str(data_dir.expanduser().absolute())}
    if not script.is_file() and not _installed():
        env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    if os.name == "nt":  # cmd.exe has no VAR=value prefix: the hook uses the default dir
        return " ".join(f'"{w}"' for w in [*words, "hook", host])
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    return " ".join([*prefix, *(shlex.quote(w) for w in [*words, "hook", host])])


def hooks_config(command: str) -> dict[str, Any]:
    """The ``hooks`` block of Claude Code's settings.json running ``command``."""
    def entry(event: str, matcher: str | None = None) -> dict[str, Any]:
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": command,
                           "timeout": HOOK_TIMEOUTS[event]}]
        return group

    return {"hooks": {
        "PreCompact": [entry("PreCompact")],
        "SessionStart": [entry("SessionStart", "compact|resume"),
                         entry("SessionStart", "startup")],
        "Stop": [entry("Stop")],
    }}


HOOKS_HINT = ("Merge the \"hooks\" block into ~/.claude/settings.json (every project) or "
              ".claude/settings.json (this one), then restart Claude Code. PreCompact and "
              "Stop capture the transcript; SessionStart adds the briefing after a "
              "compaction, on resume and at startup.")


def client_config(client: str, launch: Launch, name: str = DEFAULT_NAME) -> dict[str, Any]:
    """The configuration document for ``client`` (one of ``CLIENTS``)."""
    if client == "vscode":
        return {"servers": {name: launch.entry(typed=True)}}
    if client == "claude-code":
        return {"mcpServers": {name: launch.entry(typed=True)}}
    if client in ("claude-desktop", "cursor", "windsurf"):
        return {"mcpServers": {name: launch.entry(typed=False)}}
    raise ValueError(f"unknown client {client!r}; valid: {', '.join(CLIENTS)}")


def paste_hint(client: str, launch: Launch, name: str = DEFAULT_NAME) -> str:
    """Where the printed configuration goes, for people (printed on stderr)."""
    entry = json.dumps(launch.entry(typed=True), ensure_ascii=False).replace("'", "'\\''")
    return _WHERE[client].replace("{name}", name).replace("{entry}", entry)
